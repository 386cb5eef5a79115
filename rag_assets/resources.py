"""Typed Dagster resources: the config, the index writer and the embedder."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from dagster import ConfigurableResource

from rag_serving.config import FileSourceConfig, RaglineConfig, load_config
from rag_serving.embedders import Embedder, create_embedder
from rag_serving.index.store import IndexStore


class RaglineConfigResource(ConfigurableResource):
    """The ragline config file; empty ``config_path`` follows the documented lookup
    order (``$RAGLINE_CONFIG``, ``./ragline.toml``, ``~/.config/ragline/ragline.toml``)."""

    config_path: str = ""

    def load(self) -> RaglineConfig:
        return load_config(self.config_path or None)

    def source(self, name: str) -> FileSourceConfig:
        """The source configured for partition ``name``."""
        return self.load().source(name)


class IndexStoreResource(ConfigurableResource):
    """All writes to the index (LanceDB tables and the Tantivy index) go through here."""

    settings: RaglineConfigResource

    def store(self) -> IndexStore:
        return IndexStore.of(self.settings.load())


class EmbedderResource(ConfigurableResource):
    """The configured embedder, loaded once per process and reused across runs."""

    settings: RaglineConfigResource

    def embedder(self) -> Embedder:
        config = self.settings.load()
        return _embedder(config.embedder.model_dump_json(), str(config.data_dir))


@cache
def _embedder(embedder_json: str, data_dir: str) -> Embedder:
    from pydantic import TypeAdapter

    from rag_serving.config import EmbedderConfig

    config = TypeAdapter(EmbedderConfig).validate_json(embedder_json)
    return create_embedder(config, Path(data_dir))


def default_resources(config_path: str = "") -> dict[str, ConfigurableResource]:
    """The resources every ragline asset needs."""
    settings = RaglineConfigResource(config_path=config_path)
    return {
        "settings": settings,
        "index_store": IndexStoreResource(settings=settings),
        "embedder": EmbedderResource(settings=settings),
    }
