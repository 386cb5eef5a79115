"""Index maintenance: compact LanceDB tables and drop old versions (which also folds
rows written since into the tables' indexes), create or retrain the search indexes
of each live generation as it grows (``rag_serving.index.ann``), merge Tantivy
segments, and remove generations nobody uses any more. Holds the index's commit
lock throughout, because LanceDB's ``optimize`` conflicts with concurrent writers
and does not retry."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from rag_serving.index.ann import ensure_search_indexes
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore


@dataclass
class MaintenanceReport:
    tables_optimized: list[str] = field(default_factory=list)
    generations_dropped: list[str] = field(default_factory=list)
    fulltext_segments: dict[str, int] = field(default_factory=dict)
    # Per live chunks table: what ensure_search_indexes did (see rag_serving/index/ann.py).
    search_indexes: dict[str, dict[str, Any]] = field(default_factory=dict)


def maintain_index(store: IndexStore, keep_versions_hours: float) -> MaintenanceReport:
    """Compact and clean the index under ``store``."""
    with store.writing():
        store.refresh()
        return _maintain(store, keep_versions_hours)


def _maintain(store: IndexStore, keep_versions_hours: float) -> MaintenanceReport:
    report = MaintenanceReport()
    manifest = read_manifest(store.layout.manifest_path, missing_ok=True)
    live = {g.key for g in (manifest.active, manifest.building) if g is not None}
    for name in store.table_names():
        if name.startswith("chunks_") and name.removeprefix("chunks_") not in live:
            store.drop(name)
            report.generations_dropped.append(name.removeprefix("chunks_"))
            continue
        store.table(name).optimize(cleanup_older_than=timedelta(hours=keep_versions_hours))
        report.tables_optimized.append(name)
        if name.startswith("chunks_"):  # never raises: a failed build is reported
            report.search_indexes[name] = ensure_search_indexes(store, name)
    root = store.layout.fulltext_root
    if root.is_dir():
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            if folder.name not in live:
                shutil.rmtree(folder, ignore_errors=True)
                if folder.name not in report.generations_dropped:
                    report.generations_dropped.append(folder.name)
                continue
            report.fulltext_segments[folder.name] = FulltextIndex(folder).merge_segments()
    return report
