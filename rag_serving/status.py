"""Per-source state of the index: counts, last indexed, and files with problems."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rag_serving.config import RaglineConfig
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore
from rag_sources.config import FileSourceConfig
from rag_sources.errors import RaglineError
from rag_sources.listing import ListedItem
from rag_sources.scanning import PendingChanges, iter_source_files, pending_changes
from rag_sources.where import sql_string


@dataclass(frozen=True)
class FileIssue:
    path: str
    severity: str
    message: str


# Problems of one severity listed item by item (the rest are counted in groups).
MAX_LISTED_ISSUES = 20
MAX_ISSUE_GROUPS = 20  # groups of problems sharing a reason, per source
MAX_GROUP_EXAMPLES = 3  # items named per group
MAX_MESSAGE_CHARS = 300  # of one problem's message, as status shows it
SEVERITIES = ("error", "skipped", "warning", "pending")
_NUMBER = re.compile(r"\d[\d,.]*")


@dataclass(frozen=True)
class IssueGroup:
    """Problems of one severity that share a reason: ``message`` is the first one's."""

    severity: str
    message: str
    count: int
    examples: list[str]  # paths of the first few items

    def as_json(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "message": self.message,
            "count": self.count,
            "examples": self.examples,
        }


def short_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _reason(issue: FileIssue) -> str:
    """What a problem says with its item taken out (its path and file name, and
    numbers), so problems with the same cause group together."""
    text = issue.message
    name = issue.path.rsplit("/", 1)[-1]
    for part in (issue.path, name):
        if part:
            text = text.replace(part, "<item>")
    return _NUMBER.sub("N", " ".join(text.split()))[:MAX_MESSAGE_CHARS]


def group_issues(issues: list[FileIssue]) -> list[IssueGroup]:
    """``issues`` grouped by severity and reason, the largest groups first within each
    severity (errors, then skipped, warnings and pending)."""
    groups: dict[tuple[str, str], list[FileIssue]] = {}
    for issue in issues:
        groups.setdefault((issue.severity, _reason(issue)), []).append(issue)
    order = {name: i for i, name in enumerate(SEVERITIES)}
    ranked = sorted(
        groups.values(), key=lambda g: (order.get(g[0].severity, len(order)), -len(g), g[0].path)
    )
    return [
        IssueGroup(
            members[0].severity,
            short_message(members[0].message),
            len(members),
            [m.path for m in members[:MAX_GROUP_EXAMPLES]],
        )
        for members in ranked
    ]


@dataclass(frozen=True)
class FailedRun:
    """The last run of a source that failed after its last completed run."""

    run_id: str
    step: str | None
    message: str
    failed_at: datetime | None

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "step": self.step,
            "message": self.message,
            "failed_at": self.failed_at.isoformat() if self.failed_at else None,
        }


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
    pending: PendingChanges | None = None  # files changed on disk since the last scan
    pending_error: str | None = None
    issues: list[FileIssue] = field(default_factory=list)
    last_failure: FailedRun | None = None  # newer than the last completed run

    def count(self, severity: str) -> int:
        return sum(1 for i in self.issues if i.severity == severity)

    def issue_groups(self) -> list[IssueGroup]:
        """The source's problems grouped by severity and reason."""
        return group_issues(self.issues)

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
            "last_failure": self.last_failure.as_json() if self.last_failure else None,
            "pending_changes": (
                {
                    "new": self.pending.new,
                    "changed": self.pending.changed,
                    "deleted": self.pending.deleted,
                    "total": self.pending.total,
                }
                if self.pending
                else None
            ),
            "pending_error": self.pending_error,
            "errors": [i.__dict__ for i in self.issues if i.severity == "error"],
            "skipped": [i.__dict__ for i in self.issues if i.severity == "skipped"],
            "warnings": [i.__dict__ for i in self.issues if i.severity == "warning"],
            # items indexed without the costly work a deferred pass will do (OCR)
            "pending": [i.__dict__ for i in self.issues if i.severity == "pending"],
            "problem_groups": [g.as_json() for g in self.issue_groups()],
        }


@dataclass(frozen=True)
class IndexStatus:
    data_dir: str
    embedder: str | None
    building: str | None  # an embedder whose generation is being built
    sources: list[SourceStatus]
    # Where the configured embedder embeds documents ("cpu (ONNX Runtime)"); None
    # when it cannot be told (a broken model folder: indexing says why).
    device: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "data_dir": self.data_dir,
            "embedder": self.embedder,
            "building_embedder": self.building,
            "embedding_device": self.device,
            "sources": [s.as_json() for s in self.sources],
        }


def index_status(config: RaglineConfig, check_pending: bool = True) -> IndexStatus:
    """State of every configured source (and of indexed sources no longer configured).

    With ``check_pending`` each configured source's folder is listed (stat only) and
    compared with what the index last saw.
    """
    layout = IndexLayout(config.data_dir, config.index_uri)
    manifest = read_manifest(layout.manifest_path, missing_ok=True)
    opened = layout.remote or Path(layout.lancedb_uri).is_dir()
    store = IndexStore.of(config, read_only=True) if opened else None
    states = {r["source"]: r for r in store.read("source_state").to_pylist()} if store else {}
    failures = {r["source"]: r for r in store.read("run_failures").to_pylist()} if store else {}
    configured = {s.name: s for s in config.sources}
    names = list(configured) + sorted(n for n in states if n not in configured)
    table = manifest.active.table if manifest.active else None
    sources = []
    for name in names:
        source_config = configured.get(name)
        state = states.get(name, {})
        scope = f"source = {sql_string(name)}"
        issues: list[FileIssue] = []
        pending, pending_error = None, None
        if store is not None:
            rows = store.read("file_issues", where=scope).to_pylist()
            issues = [
                FileIssue(r["path"], r["severity"], r["message"])
                for r in sorted(rows, key=lambda r: (r["severity"], r["path"]))
            ]
        if check_pending and source_config is not None:
            state_dir = layout.source_state_dir(name, source_config.shared_state)
            pending, pending_error = _pending(
                store, source_config, scope, state.get("last_indexed_at"), table,
                state_dir if state_dir.is_dir() else None,
            )  # fmt: skip
        sources.append(
            SourceStatus(
                name=name,
                kind=source_config.kind if source_config else "?",
                path=str(source_config.path or "") if source_config else "",
                configured=source_config is not None,
                files=store.count("files", scope) if store else 0,
                documents=store.count("documents", scope) if store else 0,
                chunks=store.count(table, scope) if store and table else 0,
                last_indexed_at=state.get("last_indexed_at"),
                last_run_id=state.get("last_run_id"),
                pending=pending,
                pending_error=pending_error,
                issues=issues,
                last_failure=_failure_since(failures.get(name), state.get("last_indexed_at")),
            )
        )
    return IndexStatus(
        str(config.data_dir),
        manifest.active.fingerprint.describe() if manifest.active else None,
        manifest.building.fingerprint.describe() if manifest.building else None,
        sources,
        embedding_device(config) if check_pending else None,
    )


def embedding_device(config: RaglineConfig) -> str | None:
    """Where the configured embedder embeds documents, or None when it cannot say
    (a model folder that does not load: indexing reports why)."""
    from rag_serving.embedders import create_embedder
    from rag_sources.errors import RaglineError

    try:
        return create_embedder(config.embedder, config.data_dir).device
    except RaglineError:
        return None


def _failure_since(row: dict[str, Any] | None, completed: datetime | None) -> FailedRun | None:
    """The recorded failure, unless a run completed after it."""
    if row is None or (completed and row["failed_at"] and row["failed_at"] <= completed):
        return None
    return FailedRun(row["run_id"], row["step"], row["message"], row["failed_at"])


def _pending(
    store: IndexStore | None,
    source: FileSourceConfig,
    scope: str,
    served_at: datetime | None,
    table: str | None,
    state_dir: Path | None = None,
) -> tuple[PendingChanges | None, str | None]:
    """Items whose state on disk is not what search serves: changed since the last
    scan, or scanned by a run that did not complete (so not yet served)."""
    try:
        listed = source.listed_items(state_dir)
    except RaglineError as exc:
        return None, str(exc)
    if listed is not None:  # the kind lists its own items (mail, feeds, a repository…)
        return _listed_pending(store, listed, scope, served_at)
    try:
        stats = list(iter_source_files(source))
    except RaglineError as exc:
        return None, str(exc)
    indexed: dict[str, tuple[int, int]] = {}
    if store is None:
        return pending_changes(stats, indexed), None
    served = served_paths(store, table, scope)
    for row in store.read(
        "files", where=scope, columns=["path", "size", "mtime_ns", "seen_at"]
    ).to_pylist():
        if not scanned_after(row["seen_at"], served_at):
            indexed[row["path"]] = (row["size"], row["mtime_ns"])
        elif row["path"] in served:
            indexed[row["path"]] = (-1, -1)  # served, but an older version of it
        # else: never served yet, so still new
    for path in served:
        indexed.setdefault(path, (-1, -1))  # served, gone from a scan that did not complete
    return pending_changes(stats, indexed), None


def _listed_pending(
    store: IndexStore | None,
    listed_items: Iterator[ListedItem],
    scope: str,
    served_at: datetime | None,
) -> tuple[PendingChanges | None, str | None]:
    """A source's items as its kind lists them (by fingerprint) against what the last
    scan recorded and search serves."""
    try:
        listed = {
            item.key: "!" if item.problem or item.unavailable else item.fingerprint
            for item in listed_items
        }
    except RaglineError as exc:
        return None, str(exc)
    return _compare_fingerprints(store, listed, scope, served_at), None


def _compare_fingerprints(
    store: IndexStore | None, listed: dict[str, str], scope: str, served_at: datetime | None
) -> PendingChanges:
    recorded: dict[str, str | None] = {}  # key → object id ("!" for a problem, None: unserved)
    if store is not None:
        for row in store.read(
            "files", where=scope, columns=["path", "fingerprint", "seen_at"]
        ).to_pylist():
            mark = "!" if (row["fingerprint"] or "").startswith("!") else row["fingerprint"]
            recorded[row["path"]] = None if scanned_after(row["seen_at"], served_at) else mark
    new = sum(1 for key in listed if key not in recorded)
    changed = sum(1 for key, seen in listed.items() if key in recorded and recorded[key] != seen)
    deleted = sum(1 for key in recorded if key not in listed)
    return PendingChanges(new, changed, deleted)


def served_paths(store: IndexStore, table: str | None, scope: str) -> set[str]:
    """Item keys that have chunks in the served generation."""
    if table is None or not store.table_exists(table):
        return set()
    return set(store.read(table, where=scope, columns=["path"]).column("path").to_pylist())


def scanned_after(seen_at: datetime | None, served_at: datetime | None) -> bool:
    """Whether a scan recorded the item after the last completed run (so search
    does not serve that version of it yet)."""
    if served_at is None:
        return True
    return seen_at is not None and seen_at > served_at
