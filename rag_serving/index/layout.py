"""Where each part of the index lives under ``data_dir``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class IndexLayout:
    """Paths of the index parts under one data directory."""

    data_dir: Path

    @property
    def lancedb_dir(self) -> Path:
        return self.data_dir / "lancedb"

    @property
    def fulltext_root(self) -> Path:
        return self.data_dir / "fulltext"

    def fulltext_dir(self, generation_key: str) -> Path:
        """The Tantivy index of one generation."""
        return self.fulltext_root / generation_key

    @property
    def manifest_path(self) -> Path:
        return self.data_dir / "index.json"

    def deferred_marker(self, source: str) -> Path:
        """Present while ``source`` has work left for a deferred pass (OCR)."""
        return self.data_dir / "deferred" / source

    def watched_signal(self, source: str) -> Path:
        """The change signal ``ragline watch`` last indexed ``source`` at: the sensor
        does not run a source again for changes the watcher has indexed."""
        return self.data_dir / "watched" / f"{source}.json"

    def source_state_dir(self, source: str) -> Path:
        """A source kind's own state (mailbox offsets, fetched feed entries)."""
        return self.data_dir / "sources" / source

    @property
    def models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def dagster_home(self) -> Path:
        return self.data_dir / "dagster"
