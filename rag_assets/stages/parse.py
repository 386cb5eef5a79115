"""Stage 2 (``parsed_documents``): parse new and changed files into documents.

A file that cannot be parsed is recorded in ``file_issues`` (and in the run's
metadata) and skipped; it never fails the source, and the document it had
before (if any) is removed so results never show content the file no longer has.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from rag_assets.progress import report
from rag_assets.sources.markdown import NoteParseError, NoteSkipped, ParsedNote, parse_markdown
from rag_assets.stages.result import FileProblem, StageResult, utcnow
from rag_serving.config import MarkdownSourceConfig
from rag_serving.index import schema as schemas
from rag_serving.index.ids import content_hash
from rag_serving.index.store import IndexStore, sql_in, sql_string

COMMIT_DOCUMENTS = 500  # parsed documents per commit...
COMMIT_BYTES = 16 * 2**20  # ...or fewer when their text reaches this size


def parse_source(
    store: IndexStore, source: MarkdownSourceConfig, full: bool, run_id: str
) -> StageResult:
    """Bring ``documents`` and ``file_issues`` in line with the ``files`` table."""
    result = StageResult()
    scope = f"source = {sql_string(source.name)}"
    files = store.read("files", where=scope).to_pylist()
    parsed_hash = _hashes(store, "documents", scope)
    issue_hash = _hashes(store, "file_issues", scope)
    live = {f["doc_id"] for f in files}
    todo = [
        f for f in files
        if full or f["error"] or f["content_hash"] not in (parsed_hash.get(f["doc_id"]), issue_hash.get(f["doc_id"]))
    ]  # fmt: skip
    result.unchanged = len(files) - len(todo)
    del files
    gone = [d for d in set(parsed_hash) | set(issue_hash) if d not in live]
    result.deleted = len([d for d in gone if d in parsed_hash])
    issues: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # parsed documents not yet written
    pending_ids: list[str] = []  # the files they (or their failures) came from
    pending_bytes = 0
    now = utcnow()
    root = Path(source.path)
    for position, file in enumerate(todo, start=1):
        outcome = _parse_one(root, source, file, run_id, now)
        pending_ids.append(file["doc_id"])
        if isinstance(outcome, dict):
            pending.append(outcome)
            pending_bytes += len(outcome["body"] or "") + len(outcome["links_json"])
            if file["doc_id"] in parsed_hash:
                result.changed += 1
            else:
                result.new += 1
            if outcome["warnings"]:
                message = "; ".join(outcome["warnings"])
                result.problems.append(FileProblem(file["path"], "warning", message))
                issues.append(
                    _issue(source, file, outcome["content_hash"], "warning", message, run_id, now)
                )
        else:
            problem, digest = outcome
            result.problems.append(problem)
            if problem.severity == "skipped":
                result.skipped += 1
            else:
                result.failed += 1
            issues.append(
                _issue(source, file, digest, problem.severity, problem.message, run_id, now)
            )
        if len(pending_ids) >= COMMIT_DOCUMENTS or pending_bytes >= COMMIT_BYTES:
            _write_documents(store, scope, pending, pending_ids)
            pending, pending_ids, pending_bytes = [], [], 0
        if position % 100 == 0:
            report(source.name, "parse", position, len(todo))
    report(source.name, "parse", len(todo), len(todo))

    # Documents are written a batch at a time, each batch in one commit (with the
    # removal of documents whose files now fail or are skipped); documents of deleted
    # files go with the last batch. Issues are few: they change in one commit.
    if pending or pending_ids or gone:
        _write_documents(store, scope, pending, pending_ids, gone)
    done_ids = [f["doc_id"] for f in todo]
    if issues or done_ids or gone:
        store.apply_changes(
            "file_issues",
            schemas.FILE_ISSUES,
            pa.Table.from_pylist(issues, schemas.FILE_ISSUES) if issues else None,
            delete_where=f"{scope} AND {sql_in('doc_id', done_ids + gone)}",
        )
    result.row_count = store.count("documents", scope)
    return result


def _write_documents(
    store: IndexStore,
    scope: str,
    documents: list[dict[str, Any]],
    done_ids: list[str],
    gone: Sequence[str] = (),
) -> None:
    """Upsert ``documents``; remove the documents of ``gone`` and of the files in
    ``done_ids`` that did not parse; in one commit."""
    parsed = {doc["doc_id"] for doc in documents}
    removed = [d for d in done_ids if d not in parsed] + list(gone)
    if not documents and not removed:
        return
    store.apply_changes(
        "documents",
        schemas.DOCUMENTS,
        pa.Table.from_pylist(documents, schemas.DOCUMENTS) if documents else None,
        delete_where=f"{scope} AND {sql_in('doc_id', removed)}" if removed else None,
    )


def _hashes(store: IndexStore, table: str, scope: str) -> dict[str, str]:
    rows = store.read(table, where=scope, columns=["doc_id", "content_hash"]).to_pylist()
    return {r["doc_id"]: r["content_hash"] for r in rows}


def _parse_one(
    root: Path, source: MarkdownSourceConfig, file: dict[str, Any], run_id: str, now: datetime
) -> dict[str, Any] | tuple[FileProblem, str | None]:
    if file["error"]:
        return FileProblem(file["path"], "error", file["error"]), None
    full_path = root / file["path"]
    try:
        data = full_path.read_bytes()
        stat = full_path.stat()
    except OSError as exc:
        message = f"cannot read the file: {exc.strerror or exc}; check its permissions"
        return FileProblem(file["path"], "error", message), None
    digest = content_hash(data)
    try:
        note = parse_markdown(data, file["path"])
    except NoteSkipped as exc:
        return FileProblem(file["path"], "skipped", str(exc)), digest
    except NoteParseError as exc:
        return FileProblem(file["path"], "error", str(exc)), digest
    except Exception as exc:  # a parser bug must not fail the whole source
        message = f"unexpected parser error ({type(exc).__name__}: {exc}); please report it"
        return FileProblem(file["path"], "error", message), digest
    return _document_row(source, file["doc_id"], note, digest, stat.st_mtime, now)


def _document_row(
    source: MarkdownSourceConfig,
    key: str,
    note: ParsedNote,
    digest: str,
    mtime: float,
    now: datetime,
) -> dict[str, Any]:
    return {
        "doc_id": key,
        "source": source.name,
        "kind": source.kind,
        "path": note.path,
        "title": note.title,
        "aliases": list(note.aliases),
        "tags": list(note.tags),
        "links_json": json.dumps([asdict(link) for link in note.links], ensure_ascii=False),
        "frontmatter_json": json.dumps(note.frontmatter, ensure_ascii=False, default=str),
        "created": note.created,
        "updated": note.updated,
        "modified": datetime.fromtimestamp(mtime, UTC),
        "content_hash": digest,
        "body": note.body,
        "body_start_line": note.body_start_line,
        "warnings": list(note.warnings),
        "indexed_at": now,
    }


def _issue(
    source: MarkdownSourceConfig,
    file: dict[str, Any],
    digest: str | None,
    severity: str,
    message: str,
    run_id: str,
    now: datetime,
) -> dict[str, Any]:
    return {
        "doc_id": file["doc_id"],
        "source": source.name,
        "path": file["path"],
        "content_hash": digest,
        "severity": severity,
        "message": message,
        "run_id": run_id,
        "recorded_at": now,
    }
