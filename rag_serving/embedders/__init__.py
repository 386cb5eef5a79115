"""Embedding providers behind one small interface, found through a registry."""

from rag_serving.embedders.base import Embedder, EmbedderFingerprint
from rag_serving.embedders.registry import available_providers, create_embedder

__all__ = ["Embedder", "EmbedderFingerprint", "available_providers", "create_embedder"]
