"""A real Tantivy index of a few one-chunk notes, for tests of how queries are read:
note number i (in the mapping's order) has chunk id i, in hex."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from rag_serving.index.filters import SearchFilters
from rag_serving.index.fulltext import FulltextIndex


def fulltext_of(folder: Path, notes: Mapping[str, str], named_paths: bool = True) -> FulltextIndex:
    """``notes`` (name → text) indexed in ``folder``; each note's path is its name, or
    with ``named_paths`` off its number (so that the path holds none of its words)."""
    index = FulltextIndex(folder / "fulltext")
    rows = [
        {"chunk_id": f"{i:032x}", "doc_id": name, "source": "s",
         "path": f"{name if named_paths else i}.md", "text": text, "row_hash": "h",
         "modified": datetime(2024, 1, 1, tzinfo=UTC)}
        for i, (name, text) in enumerate(notes.items())
    ]  # fmt: skip
    index.replace([], rows)
    return index


def found(index: FulltextIndex, notes: Mapping[str, str], query: str, **options: bool) -> list[str]:
    """The names of the notes ``query`` finds, best first."""
    names = list(notes)
    hits = index.search(query, SearchFilters(), 10, **options)
    return [names[int(hit.chunk_id, 16)] for hit in hits]
