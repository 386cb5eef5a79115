"""Embedding providers behind one small interface, found through a registry."""

from rag_serving.embedders.base import Embedder
from rag_serving.embedders.registry import available_providers, create_embedder
from rag_serving.index.fingerprint import EmbedderFingerprint

__all__ = ["Embedder", "EmbedderFingerprint", "available_providers", "create_embedder"]
