"""An embedder wrapper that records how many texts each ``embed_documents`` call
gets (the streaming and bounded-memory tests check batch sizes with it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rag_serving.embedders import Embedder


class Recorder:
    """Wraps ``embed_documents`` to record how many texts each call gets."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.calls: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.embedder, name)

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return self.embedder.embed_documents(texts)
