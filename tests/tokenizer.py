"""The bundled model's real tokenizer for chunker tests, counting how it is used."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from rag_serving.config import SentenceTransformersConfig
from rag_serving.embedders.sentence_transformers import SentenceTransformersEmbedder


class Counter:
    """The real tokenizer, counting its calls and the texts it was given."""

    def __init__(self, embedder: SentenceTransformersEmbedder) -> None:
        self.embedder = embedder
        self.calls = 0
        self.texts = 0

    def __call__(self, texts: Sequence[str]) -> list[int]:
        self.calls += 1
        self.texts += len(texts)
        return self.embedder.count_tokens(texts)


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformersEmbedder:
    return SentenceTransformersEmbedder(SentenceTransformersConfig())


@pytest.fixture
def count(embedder: SentenceTransformersEmbedder) -> Counter:
    return Counter(embedder)
