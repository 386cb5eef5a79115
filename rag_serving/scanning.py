"""Listing a source's files: include/exclude globs and ignored folders, stat only."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from wcmatch import glob

from rag_serving.config import FileSourceConfig
from rag_serving.errors import ConfigError

_FLAGS = glob.GLOBSTAR | glob.DOTGLOB


@dataclass(frozen=True)
class FileStat:
    path: str  # relative POSIX path inside the source root
    size: int
    mtime_ns: int


def iter_source_files(source: FileSourceConfig) -> Iterator[FileStat]:
    """Every file of ``source`` that its globs (or its attachment types) select, in a
    stable order."""
    root = Path(source.path)
    if not root.is_dir():
        raise ConfigError(
            f"source {source.name!r}: folder {root} does not exist or is not a folder; "
            "fix `path` in the config"
        )
    ignored = set(source.ignore_dirs)
    extra = source.extra_suffixes()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in ignored)
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            rel = full.relative_to(root).as_posix()
            if not glob.globmatch(rel, source.include, flags=_FLAGS) and not (
                extra and filename.lower().endswith(extra)
            ):
                continue
            if source.exclude and glob.globmatch(rel, source.exclude, flags=_FLAGS):
                continue
            try:
                st = full.stat()
            except OSError:
                continue  # vanished between listing and stat; the next scan settles it
            if not full.is_file():
                continue
            yield FileStat(rel, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class PendingChanges:
    """Files whose stat differs from what the index last saw."""

    new: int
    changed: int
    deleted: int

    @property
    def total(self) -> int:
        return self.new + self.changed + self.deleted


def pending_changes(stats: list[FileStat], indexed: dict[str, tuple[int, int]]) -> PendingChanges:
    """Compare a fresh listing with ``indexed`` (path → (size, mtime_ns))."""
    seen = {s.path for s in stats}
    new = sum(1 for s in stats if s.path not in indexed)
    changed = sum(1 for s in stats if s.path in indexed and indexed[s.path] != (s.size, s.mtime_ns))
    deleted = sum(1 for p in indexed if p not in seen)
    return PendingChanges(new, changed, deleted)
