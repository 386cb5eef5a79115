"""Typed Dagster resources: the config, the index writer and the embedder."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from dagster import ConfigurableResource

from rag_assets.run_values import RUN_VALUES, RunValuesIOManager
from rag_serving.config import RaglineConfig, load_config
from rag_serving.embedders import Embedder, create_embedder
from rag_serving.index.commit_lock import CommitLock, local_commit_lock, postgres_commit_lock
from rag_serving.index.store import IndexStore
from rag_sources.config import FileSourceConfig

# One lock per database: every index written by the hosts sharing it takes turns.
_POSTGRES_LOCK_NAME = "index"


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
        return writer_store(self.settings.load())


def commit_lock(config: RaglineConfig) -> CommitLock:
    """The index's commit lock: in the Postgres database the Dagster instance is in
    when it is shared by hosts (keyed by the index's location), else a lock file of
    the data dir."""
    url = config.dagster.storage_url()
    if url is not None:
        return postgres_commit_lock(url, config.index_uri or _POSTGRES_LOCK_NAME)
    return local_commit_lock(config.data_dir)


def writer_store(config: RaglineConfig) -> IndexStore:
    """The index, opened to write: every commit holds the index's commit lock."""
    return IndexStore.of(config, commit_lock=commit_lock(config))


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


def default_resources(config_path: str = "") -> dict[str, Any]:
    """The resources every ragline asset needs."""
    settings = RaglineConfigResource(config_path=config_path)
    return {
        "settings": settings,
        "index_store": IndexStoreResource(settings=settings),
        "embedder": EmbedderResource(settings=settings),
        RUN_VALUES: RunValuesIOManager(),
    }
