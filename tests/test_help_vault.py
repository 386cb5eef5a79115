"""Keyword and paraphrase queries on a slice of the real Obsidian help vault."""

from __future__ import annotations

import pytest

from rag_serving.config import RaglineConfig
from rag_serving.search import SearchEngine

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def engine(help_index: RaglineConfig) -> SearchEngine:
    return SearchEngine(help_index)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("wikilink heading block link syntax", "Linking notes and files/Internal links.md"),
        ("embed pdf page", "Linking notes and files/Embed files.md"),
        ("aliases frontmatter", "Linking notes and files/Aliases.md"),
        ("callout fold", "Editing and formatting/Callouts.md"),
    ],
)
def test_keyword_queries(engine: SearchEngine, query: str, expected: str) -> None:
    paths = [h.path for h in engine.search(query, k=3, mode="bm25").hits]
    assert expected in paths
    assert expected in [h.path for h in engine.search(query, k=3).hits]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "show the contents of one note inside another note",
            "Linking notes and files/Embed files.md",
        ),
        ("use alternative names for the same note", "Linking notes and files/Aliases.md"),
        (
            "keep my notes the same on my phone and my laptop",
            "Getting started/Sync your notes across devices.md",
        ),
    ],
)
def test_paraphrase_queries(engine: SearchEngine, query: str, expected: str) -> None:
    paths = [h.path for h in engine.search(query, k=5).hits]
    assert expected in paths, paths


def test_slice_indexed_in_place(help_index: RaglineConfig) -> None:
    from rag_serving.status import index_status

    status = index_status(help_index).sources[0]
    assert status.documents >= 30 and status.chunks > status.documents
    assert not [i for i in status.issues if i.severity == "error"]
