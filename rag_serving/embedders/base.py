"""The interface every embedding provider implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from rag_serving.index.fingerprint import EmbedderFingerprint


class Embedder(ABC):
    """Turns texts into unit-length float32 vectors.

    ``max_tokens`` is the number of the model's own tokens a text may have
    (special tokens excluded); chunkers use ``count_tokens`` to stay within it so
    no text is ever truncated silently.
    """

    provider: str = ""

    @property
    @abstractmethod
    def model(self) -> str: ...

    @property
    @abstractmethod
    def dimension(self) -> int: ...

    @property
    @abstractmethod
    def max_tokens(self) -> int: ...

    @abstractmethod
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Token count of each text, as the model will see it (no special tokens)."""

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts to be indexed, shape (len(texts), dimension)."""

    @abstractmethod
    def embed_query(self, text: str) -> np.ndarray:
        """The vector for one search query, shape (dimension,)."""

    @property
    def device(self) -> str:
        """Where documents are embedded, for status and index output."""
        return "cpu"

    @property
    def fingerprint(self) -> EmbedderFingerprint:
        return EmbedderFingerprint(self.provider, self.model, self.dimension)

    def prepare_query_path(self) -> None:  # noqa: B027 - optional hook
        """Make whatever a fast query path needs (called at index time)."""
