"""What ``open`` and ``neighbors`` add for code, whatever its source: a code chunk's
whole symbol and the other symbols of its file."""

from __future__ import annotations

from typing import Any

from rag_serving.index.store import IndexStore
from rag_serving.mcp.models import SymbolOut
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
        symbol = facet_value(row["facets"], "symbol")
        if symbol is None:
            continue
        if row["chunk_id"] == exclude:
            excluded = symbol
        known = found.get(symbol)
        if known is None:
            found[symbol] = SymbolOut(
                name=symbol,
                kind=facet_value(row["facets"], "symbol_kind"),
                line_start=row["line_start"],
                line_end=row["line_end"],
                chunk_id=row["chunk_id"],
            )
        else:
            known.line_end = max(known.line_end, row["line_end"])
    return [s for name, s in found.items() if name != excluded]
