"""Removing a source that is no longer configured from every part of the index."""

from __future__ import annotations

from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.store import IndexStore
from rag_sources.where import sql_string

SOURCE_TABLES = (
    "files", "documents", "file_issues", "staged_chunks", "source_state", "run_failures",
    "model_tags",
)  # fmt: skip


def indexed_sources(store: IndexStore) -> set[str]:
    """Every source name that has rows anywhere in the index."""
    names: set[str] = set()
    for table in ("files", "source_state"):
        if store.table_exists(table):
            names.update(store.read(table, columns=["source"]).column("source").to_pylist())
    return names


def prune_source(store: IndexStore, source: str) -> dict[str, int]:
    """Delete ``source``'s rows from LanceDB (every generation) and Tantivy.

    Returns the number of rows removed per table.
    """
    scope = f"source = {sql_string(source)}"
    removed: dict[str, int] = {}
    tables = [t for t in store.table_names() if t in SOURCE_TABLES or t.startswith("chunks_")]
    for table in tables:
        count = store.count(table, scope)
        if count:
            store.delete(table, scope)
        removed[table] = count
    root = store.layout.fulltext_root
    if root.is_dir():
        for folder in root.iterdir():
            if folder.is_dir():
                FulltextIndex(folder).delete_source(source)
    return removed
