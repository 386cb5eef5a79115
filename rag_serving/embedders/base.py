"""The interface every embedding provider implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from rag_sources.versions import CHUNKER_VERSION


@dataclass(frozen=True)
class EmbedderFingerprint:
    """What an index's vectors were made with; searching with another is an error."""

    provider: str
    model: str
    dimension: int
    chunker_version: str = CHUNKER_VERSION
    # Texts the model sees before each document and query (e5: "passage: ", "query: "):
    # other prefixes make other vectors.
    document_prefix: str = ""
    query_prefix: str = ""

    def as_dict(self) -> dict[str, str | int]:
        data = asdict(self)
        for name in ("document_prefix", "query_prefix"):
            if not data[name]:
                del data[name]  # index.json files stay as they were without prefixes
        return data

    def key(self) -> str:
        """A short string that identifies the fingerprint (used in file names)."""
        import hashlib

        text = f"{self.provider}|{self.model}|{self.dimension}|{self.chunker_version}"
        if self.document_prefix or self.query_prefix:
            text += f"|{self.document_prefix}|{self.query_prefix}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        return (
            f"{self.provider}:{self.model} ({self.dimension} dims, chunker {self.chunker_version})"
        )


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
    def fingerprint(self) -> EmbedderFingerprint:
        return EmbedderFingerprint(self.provider, self.model, self.dimension)

    def prepare_query_path(self) -> None:  # noqa: B027 - optional hook
        """Make whatever a fast query path needs (called at index time)."""
