"""Stage 2 (``parsed_documents``): parse new and changed items into documents.

An item that cannot be parsed is recorded in ``file_issues`` (and in the run's
metadata) and skipped; it never fails the source, and the document it had before
(if any) is removed so results never show content the item no longer has — except
for an item that exists but cannot be read now (``UNAVAILABLE_MARK``): its document
is kept, and its issue cleared once it can be read again.

Parsed output is reused by content hash and parser version: a renamed or copied
file is not parsed again, and a new version of one parser re-parses only the items
of its type. Costly work a parser defers in a run's first pass (OCR) is done by a
deferred pass (``deferred_pass``), so it never holds back the other items.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

import pyarrow as pa

from rag_assets.progress import report
from rag_assets.sources import SourceKind
from rag_assets.stages.autotag import DocumentTagger
from rag_assets.stages.result import FileProblem, StageResult, return_freed_memory, utcnow
from rag_assets.stages.scan import PROBLEM_MARKS, UNAVAILABLE_MARK
from rag_serving.index import schema as schemas
from rag_serving.index.store import IndexStore
from rag_sources.formats import router
from rag_sources.formats.markdown import note_date_from_name
from rag_sources.formats.model import ItemError, ItemSkipped, ParsedDocument, json_safe
from rag_sources.where import sql_in, sql_string

COMMIT_DOCUMENTS = 500  # parsed documents per commit...
COMMIT_BYTES = 16 * 2**20  # ...or fewer when their text reaches this size
LOOKUP_BATCH = 500  # content hashes per query when looking for reusable parses
MESSAGE_CHARS = 500  # of a problem's message (a library's error text can be long)
# An absolute path in a message (a library's install folder, a temporary file): its
# last part is kept. Messages reach remote MCP callers through ``file_issues``.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~-])~?/(?:[^\s'\"`,;()<>/]+/)+([^\s'\"`,;()<>]*)")
_REUSED_COLUMNS = [
    "content_hash", "parser", "body", "body_start_line", "sections_json", "frontmatter_json",
    "aliases", "tags", "links_json", "created", "updated", "warnings", "parsed_title",
    "deferred",
]  # fmt: skip


def parse_source(
    store: IndexStore,
    kind: SourceKind,
    full: bool,
    run_id: str,
    deferred_pass: bool = False,
    only: set[str] | None = None,
    tagger: DocumentTagger | None = None,
) -> StageResult:
    """Bring ``documents`` and ``file_issues`` in line with the ``files`` table (for
    the doc ids ``only``, when given: a watch run's changed items); ``tagger`` adds
    the model's tags (``auto_tags``)."""
    result = StageResult()
    name = kind.config.name
    scope = f"source = {sql_string(name)}"
    where = scope if only is None else f"{scope} AND {sql_in('doc_id', sorted(only))}"
    files = store.read(
        "files",
        where=where,
        columns=["doc_id", "path", "content_hash", "error", "mtime_ns", "fingerprint"],
    ).to_pylist()
    parsed = _rows(store, "documents", where, ["doc_id", "content_hash", "parser", "deferred"])
    issues = _rows(store, "file_issues", where, ["doc_id", "content_hash", "parser"])
    live = {f["doc_id"] for f in files}
    # Issues of items that could not be read before and can now, their documents kept
    # meanwhile unchanged: nothing else would clear them.
    recovered = [
        f["doc_id"]
        for f in files
        if not f["error"] and issues.get(f["doc_id"], {}).get("parser") == UNAVAILABLE_MARK
    ]
    todo = [
        f
        for f in files
        if full
        or _needs_parse(kind, f, parsed, issues, deferred_pass)
        or (tagger is not None and tagger.owes(f["doc_id"]) and not f["error"])
    ]
    result.unchanged = len(files) - len(todo)
    del files
    gone = [d for d in set(parsed) | set(issues) if d not in live]
    result.deleted = len([d for d in gone if d in parsed])
    reusable = {} if full else _reusable_parses(store, kind, todo, deferred_pass)
    options = kind.parse_options(allow_deferred_work=deferred_pass)
    new_issues: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # parsed documents not yet written
    pending_ids: list[str] = []  # the items they (or their failures) came from
    pending_bytes = 0
    now = utcnow()
    for position, file in enumerate(todo, start=1):
        version = kind.parser_version(file["path"])
        # An item with a problem keeps no hash of what it holds now: nothing to reuse.
        donor = None if file["error"] else reusable.get((file["content_hash"], version))
        if donor is not None:
            row = _document_row(kind, file, _reused(store, donor), version, now)
            result.extra["reused_parses"] = int(result.extra.get("reused_parses", 0)) + 1
            outcome: dict[str, Any] | FileProblem = row
        else:
            outcome = _parse_one(kind, file, options, version, now)
        if (
            file["error"] and file["fingerprint"] == UNAVAILABLE_MARK
        ):  # cannot be read now: the document it had stays, its issue is recorded
            version = UNAVAILABLE_MARK
        else:
            pending_ids.append(file["doc_id"])
        if isinstance(outcome, dict):
            pending.append(outcome)
            pending_bytes += len(outcome["body"] or "") + len(outcome["links_json"])
            before = parsed.get(file["doc_id"])
            if before is None:
                result.new += 1
            elif (
                before["content_hash"] == file["content_hash"]
                and before["parser"] == version
                and not (deferred_pass and before["deferred"])
            ):  # only redone because of a full rebuild: the same input, the same parser
                result.rebuilt += 1
            else:
                result.changed += 1
            if tagger is not None:
                tagger.apply(outcome, new=before is None)
            notice = _notice(outcome)
            if notice is not None:
                result.problems.append(FileProblem(file["path"], *notice))
                new_issues.append(_issue(name, file, *notice, version, run_id, now))
        else:
            result.problems.append(outcome)
            if outcome.severity == "skipped":
                result.skipped += 1
            else:
                result.failed += 1
            new_issues.append(
                _issue(name, file, outcome.severity, outcome.message, version, run_id, now)
            )
        if len(pending_ids) >= COMMIT_DOCUMENTS or pending_bytes >= COMMIT_BYTES:
            if tagger is not None:
                tagger.flush()
            _write_documents(store, scope, pending, pending_ids)
            pending, pending_ids, pending_bytes = [], [], 0
        if position % 100 == 0:
            report(name, "parse", position, len(todo))
    report(name, "parse", len(todo), len(todo))

    # Documents are written a batch at a time, each batch in one commit (with the
    # removal of documents whose items now fail or are skipped); documents of deleted
    # items go with the last batch. Issues are few: they change in one commit.
    if tagger is not None:
        tagger.flush(gone)
        summary = tagger.summary()
        if summary:
            result.extra["auto_tags"] = summary
    if pending or pending_ids or gone:
        _write_documents(store, scope, pending, pending_ids, gone)
    done_ids = [f["doc_id"] for f in todo]
    if new_issues or done_ids or gone or recovered:
        store.apply_changes(
            "file_issues",
            schemas.FILE_ISSUES,
            pa.Table.from_pylist(new_issues, schemas.FILE_ISSUES) if new_issues else None,
            delete_where=f"{scope} AND {sql_in('doc_id', done_ids + gone + recovered)}",
        )
    result.row_count = store.count("documents", scope)
    waiting = store.count("documents", f"{scope} AND array_length(deferred) > 0")
    result.extra["deferred_documents"] = waiting
    _mark_deferred(store, name, waiting)
    return_freed_memory()
    return result


def _rows(store: IndexStore, table: str, scope: str, columns: list[str]) -> dict[str, dict]:
    return {r["doc_id"]: r for r in store.read(table, where=scope, columns=columns).to_pylist()}


def _needs_parse(
    kind: SourceKind,
    file: dict[str, Any],
    parsed: dict[str, dict],
    issues: dict[str, dict],
    deferred_pass: bool,
) -> bool:
    if file["error"]:
        return True
    version = kind.parser_version(file["path"])
    doc = parsed.get(file["doc_id"])
    if doc is not None:
        if doc["content_hash"] != file["content_hash"] or doc["parser"] != version:
            return True
        return deferred_pass and bool(doc["deferred"])
    issue = issues.get(file["doc_id"])
    return issue is None or (issue["content_hash"], issue["parser"]) != (
        file["content_hash"],
        version,
    )


def _reusable_parses(
    store: IndexStore, kind: SourceKind, todo: list[dict[str, Any]], deferred_pass: bool
) -> dict[tuple[str, str], str]:
    """(content hash, parser version) → the doc_id of a document, in any source, that
    already holds that parse: a renamed or copied item is copied, not parsed again."""
    wanted = {
        (f["content_hash"], kind.parser_version(f["path"]))
        for f in todo
        if f["content_hash"] and not f["error"]
    }
    hashes = sorted({digest for digest, _ in wanted})
    found: dict[tuple[str, str], str] = {}
    for start in range(0, len(hashes), LOOKUP_BATCH):
        where = sql_in("content_hash", hashes[start : start + LOOKUP_BATCH])
        rows = store.read(
            "documents", where=where, columns=["doc_id", "content_hash", "parser", "deferred"]
        )
        for row in rows.to_pylist():
            key = (row["content_hash"], row["parser"])
            # In the deferred pass a parse that still lacks its deferred work is redone.
            if key in wanted and not (deferred_pass and row["deferred"]):
                found.setdefault(key, row["doc_id"])
    return found


def _reused(store: IndexStore, doc_id: str) -> dict[str, Any]:
    rows = store.read("documents", where=f"doc_id = {sql_string(doc_id)}", columns=_REUSED_COLUMNS)
    return rows.to_pylist()[0]


def _parse_one(
    kind: SourceKind,
    file: dict[str, Any],
    options: Any,
    version: str,
    now: datetime,
) -> dict[str, Any] | FileProblem:
    path = file["path"]
    if file["error"]:
        severity, _ = PROBLEM_MARKS.get(file["fingerprint"], ("error", False))
        return FileProblem(path, severity, file["error"])
    try:
        document = kind.parse(path, options, file["content_hash"])
    except ItemSkipped as exc:
        return FileProblem(path, "skipped", problem_message(str(exc)))
    except ItemError as exc:
        return FileProblem(path, "error", problem_message(str(exc)))
    except OSError as exc:
        message = f"cannot read the file: {exc.strerror or exc}; check its permissions"
        return FileProblem(path, "error", problem_message(message))
    except Exception as exc:  # a parser bug must not fail the whole source
        message = f"unexpected parser error ({type(exc).__name__}: {exc}); please report it"
        return FileProblem(path, "error", problem_message(message))
    return _document_row(kind, file, _fields(document), version, now)


def problem_message(text: str) -> str:
    """A problem's message as stored and served: one line, capped, and each absolute
    path cut to its last part (``…/name``): no server path reaches a remote caller."""
    text = _ABSOLUTE_PATH.sub(lambda m: "…/" + m.group(1), " ".join(text.split()))
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def _fields(document: ParsedDocument) -> dict[str, Any]:
    """The path-independent columns of a parsed document (what a copy can reuse)."""
    return {
        "body": document.body,
        "body_start_line": document.body_start_line,
        "sections_json": json.dumps([s.as_json() for s in document.sections], ensure_ascii=False),
        "frontmatter_json": json.dumps(json_safe(document.metadata), ensure_ascii=False),
        "aliases": list(document.aliases),
        "tags": list(document.tags),
        "links_json": json.dumps([asdict(link) for link in document.links], ensure_ascii=False),
        "created": document.created,
        "updated": document.updated,
        "warnings": list(document.warnings),
        "parsed_title": document.title,
        "deferred": list(document.deferred),
    }


def _document_row(
    kind: SourceKind,
    file: dict[str, Any],
    fields: dict[str, Any],
    version: str,
    now: datetime,
) -> dict[str, Any]:
    key = file["path"]
    file_type = kind.file_type(key)
    return {
        **{k: v for k, v in fields.items() if k not in ("content_hash", "parser")},
        "doc_id": file["doc_id"],
        "source": kind.config.name,
        "kind": kind.name,
        "path": key,
        "title": short_title(
            fields["parsed_title"] or _title_from_key(key), kind.config.limits.max_heading_chars
        ),
        "modified": item_date(key, file_type, version, file["mtime_ns"], fields),
        "content_hash": file["content_hash"],
        "indexed_at": now,
        "file_type": file_type,
        "facets": kind.facets(key, json.loads(fields["frontmatter_json"] or "{}")),
        "parser": version,
    }


def item_date(
    key: str, file_type: str | None, version: str, mtime_ns: int | None, fields: dict[str, Any]
) -> datetime | None:
    """An item's date: the ``modified`` column that hits show and ``--after`` /
    ``--before`` compare (staleness compares the ``files`` table's mtime, not this).

    - a note (what the Markdown parser read): its frontmatter ``date`` / ``created``,
      else a date in its file name (``2024-01-15.md``, ``2024-01-15 Meeting.md``,
      ``2024-W03.md``), else the file's mtime: a later edit does not move a daily note;
    - any other file: its mtime (a PDF's or Office file's own creation date is a stamp
      of the software that wrote it, often a template's or a converter's);
    - an item that is not a file: the date it says it was written (a commit's author
      date, a message's Date, a feed entry's published date), else its ``updated``.

    Computed here, from the key, so that a copy of a parse keeps its own name's date.
    """
    if file_type == "md" and version == router.PARSER_VERSIONS["md"]:
        dated = fields["created"] or note_date_from_name(key)
        if dated is not None:
            return dated
    if mtime_ns is not None:
        return datetime.fromtimestamp(mtime_ns / 1e9, UTC)
    return fields["created"] or fields["updated"]


def short_title(title: str, limit: int) -> str:
    """``title`` on one line, cut at a word within ``limit`` characters (a title is in
    every hit: a 200 kB mail subject or frontmatter title must not be)."""
    line = (
        " ".join(title.split()) if len(title) <= 4 * limit else " ".join(title[: 4 * limit].split())
    )
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + "…"


def _title_from_key(key: str) -> str:
    name = PurePosixPath(key)
    return name.stem or name.name or key


def _notice(row: dict[str, Any]) -> tuple[str, str] | None:
    """(severity, message) for a parsed document with pending work or warnings."""
    parts = list(row["warnings"])
    if row["deferred"]:
        queued = "; ".join(row["deferred"])
        return "pending", "; ".join([f"queued for a later pass: {queued}", *parts])
    return ("warning", "; ".join(parts)) if parts else None


def _write_documents(
    store: IndexStore,
    scope: str,
    documents: list[dict[str, Any]],
    done_ids: list[str],
    gone: Sequence[str] = (),
) -> None:
    """Upsert ``documents``; remove the documents of ``gone`` and of the items in
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


def _mark_deferred(store: IndexStore, source: str, waiting: int) -> None:
    """Leave a marker while the source has deferred work: the sensor sees it with one
    stat and asks for a deferred pass."""
    marker = store.layout.deferred_marker(source)
    if waiting:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(f"{waiting}\n", encoding="utf-8")
    else:
        marker.unlink(missing_ok=True)


def _issue(
    source: str,
    file: dict[str, Any],
    severity: str,
    message: str,
    parser: str,
    run_id: str,
    now: datetime,
) -> dict[str, Any]:
    return {
        "doc_id": file["doc_id"],
        "source": source,
        "path": file["path"],
        "content_hash": file["content_hash"],
        "severity": severity,
        "message": message,
        "run_id": run_id,
        "recorded_at": now,
        "parser": parser,
    }
