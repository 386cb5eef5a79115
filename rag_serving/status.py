"""Per-source state of the index: counts, last indexed, and files with problems."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rag_serving.config import RaglineConfig
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore, sql_string


@dataclass(frozen=True)
class FileIssue:
    path: str
    severity: str
    message: str


@dataclass(frozen=True)
class SourceStatus:
    name: str
    kind: str
    path: str
    configured: bool
    files: int
    documents: int
    chunks: int
    last_indexed_at: datetime | None
    last_run_id: str | None
    issues: list[FileIssue] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": self.path,
            "configured": self.configured,
            "files": self.files,
            "documents": self.documents,
            "chunks": self.chunks,
            "last_indexed_at": self.last_indexed_at.isoformat() if self.last_indexed_at else None,
            "last_run_id": self.last_run_id,
            "errors": [i.__dict__ for i in self.issues if i.severity == "error"],
            "skipped": [i.__dict__ for i in self.issues if i.severity == "skipped"],
            "warnings": [i.__dict__ for i in self.issues if i.severity == "warning"],
        }


@dataclass(frozen=True)
class IndexStatus:
    data_dir: str
    embedder: str | None
    sources: list[SourceStatus]

    def as_json(self) -> dict[str, Any]:
        return {
            "data_dir": self.data_dir,
            "embedder": self.embedder,
            "sources": [s.as_json() for s in self.sources],
        }


def index_status(config: RaglineConfig) -> IndexStatus:
    """State of every configured source (and of indexed sources no longer configured)."""
    layout = IndexLayout(config.data_dir)
    embedder = None
    if layout.manifest_path.is_file():
        embedder = read_manifest(layout.manifest_path).fingerprint.describe()
    store = None if not layout.lancedb_dir.is_dir() else IndexStore(config.data_dir)
    states = {}
    if store is not None:
        states = {r["source"]: r for r in store.read("source_state").to_pylist()}
    configured = {s.name: s for s in config.sources}
    names = list(configured) + sorted(n for n in states if n not in configured)
    sources = []
    for name in names:
        source_config = configured.get(name)
        state = states.get(name, {})
        scope = f"source = {sql_string(name)}"
        issues = []
        if store is not None:
            rows = store.read("file_issues", where=scope).to_pylist()
            issues = [
                FileIssue(r["path"], r["severity"], r["message"])
                for r in sorted(rows, key=lambda r: (r["severity"], r["path"]))
            ]
        sources.append(
            SourceStatus(
                name=name,
                kind=source_config.kind if source_config else "?",
                path=str(source_config.path) if source_config else "",
                configured=source_config is not None,
                files=store.count("files", scope) if store else 0,
                documents=store.count("documents", scope) if store else 0,
                chunks=store.count("chunks", scope) if store else 0,
                last_indexed_at=state.get("last_indexed_at"),
                last_run_id=state.get("last_run_id"),
                issues=issues,
            )
        )
    return IndexStatus(str(config.data_dir), embedder, sources)
