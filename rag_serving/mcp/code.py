"""What ``open`` and ``neighbors`` add for code and commits (git sources): a code
chunk's whole symbol, the other symbols of its file, the commits that touched it."""

from __future__ import annotations

import json
from typing import Any

from rag_serving.index.store import IndexStore
from rag_serving.mcp.links import Edge
from rag_serving.mcp.models import CommitOut, SymbolOut
from rag_sources.kinds.git import COMMIT_KEY_PREFIX
from rag_sources.where import sql_in, sql_string

MAX_COMMITS = 10  # the most recent commits that touched a file, for `neighbors`


def facet(facets: list[str] | None, name: str) -> str | None:
    prefix = f"{name}:"
    return next((f[len(prefix) :] for f in facets or () if f.startswith(prefix)), None)


def symbol_range(
    store: IndexStore, table: str, chunk: dict[str, Any]
) -> tuple[int, int, str] | None:
    """(first line, last line, heading) of the whole symbol a code chunk is (a part
    of): every chunk of its document that defines the same symbol. None when the
    chunk is not code."""
    symbol = facet(chunk.get("facets"), "symbol")
    if symbol is None:
        return None
    where = (
        f"doc_id = {sql_string(chunk['doc_id'])} AND "
        f"array_has(facets, {sql_string('symbol:' + symbol)})"
    )
    rows = store.read(table, where=where, columns=["line_start", "line_end", "facets"]).to_pylist()
    rows = [r for r in rows if facet(r["facets"], "symbol") == symbol] or [chunk]
    kind = facet(chunk.get("facets"), "symbol_kind")
    heading = f"{kind} {symbol}" if kind else symbol
    return min(r["line_start"] for r in rows), max(r["line_end"] for r in rows), heading


def file_symbols(
    store: IndexStore, table: str | None, doc_id: str, exclude: str | None
) -> list[SymbolOut]:
    """The symbols a file's code chunks define, in file order (a symbol split in
    parts is listed once, with its whole line range)."""
    if table is None or not store.table_exists(table):
        return []
    rows = store.read(
        table,
        where=f"doc_id = {sql_string(doc_id)}",
        columns=["chunk_id", "ordinal", "line_start", "line_end", "facets"],
    ).to_pylist()
    found: dict[str, SymbolOut] = {}
    excluded = None
    for row in sorted(rows, key=lambda r: r["ordinal"]):
        symbol = facet(row["facets"], "symbol")
        if symbol is None:
            continue
        if row["chunk_id"] == exclude:
            excluded = symbol
        known = found.get(symbol)
        if known is None:
            found[symbol] = SymbolOut(
                name=symbol,
                kind=facet(row["facets"], "symbol_kind"),
                line_start=row["line_start"],
                line_end=row["line_end"],
                chunk_id=row["chunk_id"],
            )
        else:
            known.line_end = max(known.line_end, row["line_end"])
    return [s for name, s in found.items() if name != excluded]


def touching_commits(store: IndexStore, edges: list[Edge]) -> list[CommitOut]:
    """The newest commits among the documents linking to a file."""
    ids = [e.origin.doc_id for e in edges if e.origin.path.startswith(COMMIT_KEY_PREFIX)]
    if not ids:
        return []
    rows = store.read(
        "documents",
        where=sql_in("doc_id", ids),
        columns=["doc_id", "path", "title", "modified", "frontmatter_json"],
    ).to_pylist()
    rows.sort(key=lambda r: (r["modified"] is not None, r["modified"]), reverse=True)
    out = []
    for row in rows[:MAX_COMMITS]:
        meta = json.loads(row["frontmatter_json"] or "{}")
        author = meta.get("author") or {}
        out.append(
            CommitOut(
                doc_id=row["doc_id"],
                sha=row["path"][len(COMMIT_KEY_PREFIX) :],
                subject=row["title"],
                author=author.get("name"),
                date=row["modified"].isoformat() if row["modified"] else None,
            )
        )
    return out


def is_commit(path: str) -> bool:
    return path.startswith(COMMIT_KEY_PREFIX)
