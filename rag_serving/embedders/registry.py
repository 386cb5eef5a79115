"""Registry of embedding providers, imported lazily so that heavy libraries
(torch, sentence-transformers) load only when a provider is actually used."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rag_serving.providers import ProviderRegistry

if TYPE_CHECKING:
    from rag_serving.config import OllamaConfig, SentenceTransformersConfig
    from rag_serving.embedders.base import Embedder

_PROVIDERS = ProviderRegistry(
    "embedder",
    {
        "sentence-transformers": "rag_serving.embedders.sentence_transformers:SentenceTransformersEmbedder",
        "ollama": "rag_serving.embedders.ollama:OllamaEmbedder",
    },
)


def register_provider(name: str, target: str) -> None:
    """Register ``module:Class`` as the implementation of provider ``name``."""
    _PROVIDERS.register(name, target)


def available_providers() -> list[str]:
    return _PROVIDERS.names()


def create_embedder(
    config: SentenceTransformersConfig | OllamaConfig, data_dir: Path | None = None
) -> Embedder:
    """Instantiate the provider named by ``config.provider``.

    ``data_dir`` is where a provider may cache derived artefacts (for example the
    ONNX query encoder of the bundled model).
    """
    return _PROVIDERS.load(config.provider)(config, data_dir=data_dir)
