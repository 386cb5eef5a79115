"""A code chunk's whole symbol, whatever its source (``open`` and context assembly)."""

from __future__ import annotations

from typing import Any

from rag_serving.index.store import IndexStore
from rag_sources.relations import facet_value
from rag_sources.where import sql_string


def symbol_range(
    store: IndexStore, table: str, chunk: dict[str, Any]
) -> tuple[int, int, str] | None:
    """(first line, last line, heading) of the whole symbol a code chunk is (a part
    of): every chunk of its document that defines the same symbol. None when the
    chunk is not code."""
    symbol = facet_value(chunk.get("facets"), "symbol")
    if symbol is None:
        return None
    where = (
        f"doc_id = {sql_string(chunk['doc_id'])} AND "
        f"array_has(facets, {sql_string('symbol:' + symbol)})"
    )
    rows = store.read(table, where=where, columns=["line_start", "line_end", "facets"]).to_pylist()
    rows = [r for r in rows if facet_value(r["facets"], "symbol") == symbol] or [chunk]
    kind = facet_value(chunk.get("facets"), "symbol_kind")
    heading = f"{kind} {symbol}" if kind else symbol
    return min(r["line_start"] for r in rows), max(r["line_end"] for r in rows), heading
