"""A word the query repeats counts as often as it is written (BM25's query term
frequency, which Tantivy's parser drops): on a real Tantivy index, and the rewriting
itself as a pure function (issue 31, item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_serving.index.filters import SearchFilters
from rag_serving.index.fulltext import FulltextIndex, weigh_repeated_words
from rag_serving.search import SearchEngine
from tests.conftest import build_index, write_config
from tests.fulltext_notes import found, fulltext_of

NOTES = {
    "flutter": "Flutter of the tail panel at speed.",
    "wing": "Wing of the tail panel at speed.",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> FulltextIndex:
    return fulltext_of(tmp_path_factory.mktemp("repeated"), NOTES, named_paths=False)


def _found(index: FulltextIndex, query: str, weigh_words: bool = True) -> list[str]:
    return found(index, NOTES, query, weigh_words=weigh_words)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("wing flutter wing", "wing^2 flutter "),
        ("Wing wing WING lift", "Wing^3   lift"),
        ("one two", "one two"),
        ('"wing wing" wing', '"wing wing" wing'),  # a phrase's words are not counted
        ('fast "fast twitch"^0.5 fast', 'fast^2 "fast twitch"^0.5 '),
        ("title:wing wing wing", "title:wing wing^2 "),
        ("a AND a", "a AND a"),  # boolean syntax is left as written
        ("-wing wing", "-wing wing"),
        ("(wing) wing", "(wing) wing"),
        ("東京 東京 tokyo", "東京 東京 tokyo"),  # left to the bigram rewrite
    ],
)
def test_weigh_repeated_words(query: str, expected: str) -> None:
    assert weigh_repeated_words(query) == expected


def test_the_word_written_twice_ranks_its_note_first(index: FulltextIndex) -> None:
    assert _found(index, "flutter wing wing") == ["wing", "flutter"]
    assert _found(index, "flutter flutter wing") == ["flutter", "wing"]
    assert _found(index, "Flutter FLUTTER wing") == ["flutter", "wing"]
    # Scored once, both queries give the same order.
    once = _found(index, "flutter wing wing", weigh_words=False)
    assert _found(index, "flutter flutter wing", weigh_words=False) == once


def test_bm25_mode_counts_a_repeated_word(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    for name, text in NOTES.items():
        (vault / f"{name}.md").write_text(text + "\n", encoding="utf-8")
    config = build_index(
        write_config(tmp_path, [{"name": "n", "kind": "markdown", "path": str(vault)}])
    )
    engine = SearchEngine(config)
    for query, first in (("flutter wing wing", "wing.md"), ("flutter flutter wing", "flutter.md")):
        assert engine.search(query, mode="bm25").hits[0].path == first
    # The keyword list hybrid mode fuses scores it once (counting lost there).
    scores = [h.score for h in engine.fulltext.search("flutter wing wing", SearchFilters(), 10)]
    assert len(scores) == 2 and scores[0] == pytest.approx(scores[1])


def test_snippets_still_mark_a_repeated_word(index: FulltextIndex) -> None:
    chunk_id = f"{list(NOTES).index('wing'):032x}"
    assert "**Wing**" in index.highlights("wing wing panel", [chunk_id])[chunk_id].marked()
