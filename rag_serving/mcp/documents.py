"""Finding an indexed note by id or by (source, path) — only in the index.

Nothing here reads a file: a note is returned only if the ``documents`` table holds
it, so a path can never reach outside the indexed sources (no traversal, no
symlinks). A note in a source the caller may not see is reported exactly like one
that does not exist.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

from rag_serving.index.store import IndexStore
from rag_serving.mcp.auth import Access
from rag_serving.status import short_message
from rag_sources.errors import RaglineError
from rag_sources.suggest import did_you_mean
from rag_sources.where import sql_in, sql_string

_ID = re.compile(r"^[0-9a-f]{8,64}$")
_MARKDOWN_SUFFIXES = (".md", ".markdown")
# Severities of file_issues whose item is not in the index (a warning's or pending
# item's is), and how a message says so.
NOT_INDEXED = {"error": "failed to index", "skipped": "is not indexed (skipped)"}


class NotFoundError(RaglineError):
    """No indexed note (visible to the caller) matches."""


@dataclass(frozen=True)
class Located:
    """A note row of ``documents``, and the chunk row when a chunk id was given."""

    doc: dict[str, Any]
    chunk: dict[str, Any] | None = None


def known_sources(store: IndexStore, configured: list[str]) -> list[str]:
    """Configured sources plus those that still have documents in the index."""
    indexed = store.read("documents", columns=["source"]).column("source").to_pylist()
    return sorted(set(configured) | set(indexed))


def check_source(source: str, access: Access, known: list[str]) -> None:
    """Fail like an unknown source for a source the caller may not see."""
    visible = access.visible(known)
    if source not in visible:
        raise NotFoundError(f"unknown source {source!r}{did_you_mean(source, visible)}")


def locate(
    store: IndexStore,
    chunks_table: str | None,
    access: Access,
    configured: list[str],
    *,
    id: str | None = None,
    source: str | None = None,
    path: str | None = None,
) -> Located:
    """The note (or chunk) named by ``id`` or by ``source`` + ``path``."""
    if id and (source or path):
        raise NotFoundError("give either `id`, or `source` and `path`, not both")
    if id:
        return _by_id(store, chunks_table, access, id.strip().lower())
    if not source or not path:
        raise NotFoundError("give `id` (a doc_id or chunk_id from search), or `source` and `path`")
    check_source(source, access, known_sources(store, configured))
    return Located(_by_path(store, source, path))


def _by_id(store: IndexStore, chunks_table: str | None, access: Access, key: str) -> Located:
    missing = NotFoundError(f"no indexed note or chunk has id {key!r}; ids come from `search`")
    if not _ID.match(key):
        raise missing
    doc = _document(store, f"doc_id = {sql_string(key)}")
    chunk = None
    if doc is None and chunks_table and store.table_exists(chunks_table):
        rows = store.read(
            chunks_table,
            where=f"chunk_id = {sql_string(key)}",
            columns=[
                "chunk_id",
                "doc_id",
                "source",
                "heading",
                "anchor",
                "line_start",
                "line_end",
                "facets",
            ],
        ).to_pylist()
        if rows:
            chunk = rows[0]
            doc = _document(store, f"doc_id = {sql_string(chunk['doc_id'])}")
    if doc is None or not access.can_see(doc["source"]):
        raise missing
    return Located(doc, chunk)


def normalize_path(path: str) -> str | None:
    """A path relative to a source's root, or None when it would leave the root."""
    cleaned = path.strip().replace("\\", "/").lstrip("/")
    if not cleaned:
        return None
    normal = posixpath.normpath(cleaned)
    if normal == ".." or normal.startswith("../") or normal == ".":
        return None
    return normal


def _by_path(store: IndexStore, source: str, path: str) -> dict[str, Any]:
    normal = normalize_path(path)
    scope = f"source = {sql_string(source)}"
    candidates = [normal] if normal else []
    if normal and not normal.lower().endswith(_MARKDOWN_SUFFIXES):
        candidates += [normal + suffix for suffix in _MARKDOWN_SUFFIXES]
    for candidate in candidates:
        doc = _document(store, f"{scope} AND path = {sql_string(candidate)}")
        if doc is not None:
            return doc
    why = not_indexed_reason(store, source, candidates)
    if why is not None:
        raise NotFoundError(why)
    paths = store.read("documents", where=scope, columns=["path"]).column("path").to_pylist()
    raise NotFoundError(f"no indexed note at {source}:{path}{did_you_mean(path, paths)}")


def not_indexed_reason(store: IndexStore, source: str, candidates: list[str]) -> str | None:
    """Why the item at one of ``candidates`` of ``source`` is not in the index, as
    ``status`` records it (it failed, or was skipped by rule; also a folder on its way
    that could not be read); None when nothing is recorded for it."""
    if not candidates or not store.table_exists("file_issues"):
        return None
    folders = [
        "/".join(parts[:n]) + "/"
        for parts in [candidates[0].split("/")]
        for n in range(1, len(parts))
    ]
    rows = store.read(
        "file_issues",
        where=f"source = {sql_string(source)} AND {sql_in('path', [*candidates, *folders])}",
        columns=["path", "severity", "message"],
    ).to_pylist()
    rows = [r for r in rows if r["severity"] in NOT_INDEXED]
    if not rows:
        return None
    # The item's own record first (in the order of candidates), then its nearest folder.
    order = [*candidates, *folders[::-1]]
    row = min(rows, key=lambda r: order.index(r["path"]))
    reason = short_message(row["message"])
    if row["path"].endswith("/"):  # a folder the scan could not list or follow
        return f"{source}:{candidates[0]} is not indexed: its folder {row['path']!r}: {reason}"
    return f"{source}:{row['path']} {NOT_INDEXED[row['severity']]}: {reason}"


def _document(store: IndexStore, where: str) -> dict[str, Any] | None:
    rows = store.read("documents", where=where).to_pylist()
    return rows[0] if rows else None
