"""Hyphens and pluses in typed queries: words a reader means apart are searched
apart, identifiers and dates stay exact, and a lone ``-`` excludes nothing (issue 14).
A real Tantivy index; the rewriting itself as a pure function."""

from __future__ import annotations

import pytest

from rag_serving.index.fulltext import FulltextIndex, loosen_joined_words
from tests.fulltext_notes import found, fulltext_of

NOTES = {
    "twitch": "Sprinters have more fast fibres; the twitch of those muscles is short.",
    "quadruplex": "Pyridostatin binds the G quadruplex near the telomere.",
    "daily": "Standup on 2024-01-15 about the garden.",
    "scattered": "The 2024 plan: 01 goal, 15 people, one garden.",
    "caspase": "Active caspase-11 drives pyroptosis.",
    "numbers": "Eleven caspase genes, 11 of them studied.",
    "sprint": "Plan the sprint, then plan the review.",
    "kebab": "Notes of the sprint-plan plugin.",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> FulltextIndex:
    return fulltext_of(tmp_path_factory.mktemp("joined"), NOTES)


def _found(index: FulltextIndex, query: str) -> list[str]:
    return found(index, NOTES, query)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("fast-twitch muscle", 'fast twitch "fast-twitch"^0.5 muscle'),
        ("PD-1+Eomes+CD8 T cells", "PD-1 Eomes CD8 T cells"),
        ("anti-CTLA-4 treatment", 'anti CTLA-4 "anti-CTLA-4"^0.5 treatment'),
        ("caspase-11", "caspase-11"),
        ("2024-01-15 note", "2024-01-15 note"),
        ("G - quadruplex", "G   quadruplex"),
        ("-exclude this", "-exclude this"),
        ("+needed fast-twitch", '+needed fast twitch "fast-twitch"^0.5'),
        ("path:notes/a-b", "path:notes/a-b"),
        ('"fast-twitch" slow-twitch', '"fast-twitch" slow twitch "slow-twitch"^0.5'),
        ("(real-time OR batch)", '(real time "real-time"^0.5 OR batch)'),
        ("real-time^2", "real time^2"),
    ],
)
def test_loosen_joined_words(query: str, expected: str) -> None:
    assert loosen_joined_words(query) == expected


def test_a_hyphenated_query_finds_its_words_apart(index: FulltextIndex) -> None:
    # Tantivy's parser made "fast-twitch" the exact phrase "fast twitch": no hit.
    assert _found(index, "fast-twitch")[:1] == ["twitch"]


def test_a_lone_hyphen_excludes_nothing(index: FulltextIndex) -> None:
    # "G - quadruplex" was parsed as G, NOT quadruplex.
    assert _found(index, "G - quadruplex")[:1] == ["quadruplex"]
    assert "quadruplex" not in _found(index, "telomere -quadruplex")


@pytest.mark.parametrize(("query", "only"), [("2024-01-15", "daily"), ("caspase-11", "caspase")])
def test_dates_and_identifiers_stay_exact(index: FulltextIndex, query: str, only: str) -> None:
    assert _found(index, query) == [only]


def test_a_kebab_case_name_finds_its_note_first(index: FulltextIndex) -> None:
    # The words apart match both notes; the phrase at half weight ranks the exact name.
    assert _found(index, "sprint-plan")[:2] == ["kebab", "sprint"]


def test_a_quoted_hyphenated_phrase_stays_a_phrase(index: FulltextIndex) -> None:
    assert _found(index, '"fast-twitch"') == []


def test_snippets_mark_the_loosened_words(index: FulltextIndex) -> None:
    chunk_id = f"{list(NOTES).index('twitch'):032x}"
    marked = index.highlights("fast-twitch", [chunk_id])[chunk_id].marked()
    assert "**fast**" in marked and "**twitch**" in marked
