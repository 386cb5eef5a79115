"""Where each part of the index lives: under ``data_dir``, except the LanceDB tables
(and what every host must share) when ``index_uri`` names object storage."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rag_serving.index.location import is_remote, storage_options
from rag_serving.index.objects import RemotePath, shared_root


@dataclass(frozen=True)
class RemoteManifest:
    """``index.json`` on object storage: a one-row LanceDB table beside the chunks
    (``index_manifest``), replaced by a conditional update (rag_serving/index/manifest.py)."""

    uri: str

    @property
    def parent(self) -> str:
        return self.uri

    def storage_options(self) -> dict[str, str]:
        return storage_options(self.uri)


@dataclass(frozen=True)
class IndexLayout:
    """Paths of the index parts under one data directory; ``index_uri`` (None: the
    local ``lancedb`` folder) is where the LanceDB tables live."""

    data_dir: Path
    index_uri: str | None = None

    @property
    def remote(self) -> bool:
        """Whether the tables live on object storage."""
        return is_remote(self.index_uri)

    @property
    def lancedb_dir(self) -> Path:
        """The local LanceDB folder (unused when the tables are remote)."""
        return self.data_dir / "lancedb"

    @property
    def lancedb_uri(self) -> str:
        """What LanceDB connects to."""
        return self.index_uri or str(self.lancedb_dir)

    @property
    def fulltext_root(self) -> Path:
        return self.data_dir / "fulltext"

    def fulltext_dir(self, generation_key: str) -> Path:
        """The Tantivy index of one generation."""
        return self.fulltext_root / generation_key

    def search_fulltext_dir(self, generation_key: str) -> Path:
        """A search host's own Tantivy index of a remote index's generation, caught up
        from the LanceDB chunks by search (rag_serving/search/replica.py)."""
        return self.data_dir / "search-fulltext" / generation_key

    @property
    def link_counts_path(self) -> Path:
        """This host's cache of the link prior's counts, per version of the documents
        table (rag_serving/search/links.py)."""
        return self.data_dir / "search-links.json"

    @property
    def manifest_path(self) -> Path | RemoteManifest:
        """``index.json`` (a table beside the others when the tables are remote)."""
        if self.remote:
            assert self.index_uri is not None
            return RemoteManifest(self.index_uri)
        return self.data_dir / "index.json"

    @property
    def shared_root(self) -> Path | RemotePath:
        """What every host must see alike: ``data_dir`` itself on a local index, objects
        beside the tables (``<index_uri>/_ragline/``) on a remote one."""
        if self.remote:
            assert self.index_uri is not None
            return shared_root(self.index_uri)
        return self.data_dir

    def deferred_marker(self, source: str) -> Path | RemotePath:
        """Present while ``source`` has work left for a deferred pass (OCR): written by
        whichever host runs the source, read by the sensor (shared)."""
        return self.shared_root / "deferred" / source

    def watched_signal(self, source: str) -> Path:
        """The change signal ``ragline watch`` last indexed ``source`` at: the sensor
        does not run a source again for changes the watcher has indexed."""
        return self.data_dir / "watched" / f"{source}.json"

    def source_state_dir(self, source: str, shared: bool = False) -> Path | RemotePath:
        """A source kind's own state: ``shared`` for state that cannot be rebuilt from
        the source (fetched feed entries), which every writer host must see; else a
        per-host cache (mailbox offsets)."""
        return (self.shared_root if shared else self.data_dir) / "sources" / source

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def dagster_home(self) -> Path:
        return self.data_dir / "dagster"
