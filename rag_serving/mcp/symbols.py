"""The symbols of a code file, for ``neighbors``."""

from __future__ import annotations

from rag_serving.index.store import IndexStore
from rag_serving.mcp.models import SymbolOut
from rag_sources.relations import facet_value
from rag_sources.where import sql_string


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
