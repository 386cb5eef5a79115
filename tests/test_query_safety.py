"""Bad queries and filters: a one-line error or a literal search, never a traceback
(issue 13, item 9). Through the search facade and the ``ragline search`` CLI."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from rag_serving.config import RaglineConfig
from rag_serving.index.filters import (
    MAX_QUERY_CHARS,
    check_query,
    normalize_path_prefix,
    parse_date,
)
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.search import SearchEngine, SearchFilters
from rag_sources.errors import FilterError, QueryError
from ragline.cli import cli
from tests.conftest import build_index, write_config

MODES = ["hybrid", "bm25", "vector"]
# Every note shares these words, so a filter alone decides what comes back.
COMMON = "zanzibar plover"
NOTES = {
    ".hidden/Secret.md": f"# Secret\n{COMMON} in the hidden folder.\n",
    "hidden/Open.md": f"# Open\n{COMMON} in the open folder.\n",
    "projects/Alpha.md": f"# Alpha\n{COMMON} on project alpha.\n",
    "Top.md": f"# Top\n{COMMON} at the top.\n",
}
# Two folders whose paths share their first 1,200 bytes: longer than a Tantivy regex
# can hold (1,000 states; a 1,000-character --path failed every BM25 search).
DEEP = "/".join(["d" * 200] * 6)
NOTES[f"{DEEP}/one/Deep.md"] = f"# Deep one\n{COMMON} far down.\n"
NOTES[f"{DEEP}/two/Deeper.md"] = f"# Deep two\n{COMMON} far down too.\n"
MTIME = datetime(2021, 3, 4, tzinfo=UTC).timestamp()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    vault = tmp_path_factory.mktemp("query-vault")
    for rel, text in NOTES.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (MTIME, MTIME))
    root = tmp_path_factory.mktemp("query-index")
    return build_index(
        write_config(root, [{"name": "notes", "kind": "markdown", "path": str(vault)}])
    )


@pytest.fixture(scope="module")
def engine(index: RaglineConfig) -> SearchEngine:
    return SearchEngine(index)


def search_cli(index: RaglineConfig, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(index.config_path), "search", *args])


def assert_one_line_error(result: Result, *fragments: str) -> None:
    """Exit 2, one line on stderr starting with "error:", no traceback."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def paths(engine: SearchEngine, mode: str, **filters: object) -> set[str]:
    result = engine.search(COMMON, k=10, mode=mode, filters=SearchFilters(**filters))  # type: ignore[arg-type]
    return {hit.path for hit in result.hits}


# ---- field:* and other syntax Tantivy refuses ----------------------------------


@pytest.mark.parametrize(
    "query", ["title:*", "text:*", "chunk_id:*", "(title:*) zanzibar", "-title:*", "//:*",
              "NOT?modified:*", "facets: * zanzibar", "a:=,:*"],
)  # fmt: skip
@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_field_star_searches_instead_of_crashing(
    engine: SearchEngine, query: str, mode: str
) -> None:
    result = engine.search(query, k=5, mode=mode)
    assert isinstance(result.hits, list)


def test_field_star_is_the_field_name_as_a_word(engine: SearchEngine) -> None:
    # `title:*` would need a fast field; it is searched as the word "title" instead.
    assert engine.search("zanzibar title:*", k=5, mode="bm25").hits
    assert engine.search("modified:*", k=10, mode="bm25").hits  # a fast field: every chunk


def test_cli_field_star_prints_hits_not_a_traceback(index: RaglineConfig) -> None:
    result = search_cli(index, "title:* zanzibar")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "Top.md" in result.output


# ---- query length ---------------------------------------------------------------


def test_a_huge_query_is_refused_at_once(engine: SearchEngine) -> None:
    start = time.monotonic()
    with pytest.raises(QueryError) as caught:
        engine.search("word " * 200_000, k=5)
    assert time.monotonic() - start < 2
    assert str(caught.value) == (
        "the query is 1,000,000 characters long; the limit is 4,000 "
        "(search with key words or a short passage)"
    )
    assert isinstance(caught.value, FilterError)  # exit code 2, like other bad input


@pytest.mark.parametrize("mode", MODES)
def test_a_query_at_the_limit_with_many_terms_still_answers(
    engine: SearchEngine, mode: str
) -> None:
    query = ("zanzibar " + "q " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]
    assert len(query) == MAX_QUERY_CHARS and len(query.split()) > 1_900
    start = time.monotonic()
    result = engine.search(query, k=5, mode=mode)
    assert time.monotonic() - start < 10
    assert result.hits


def test_cli_huge_query_is_one_line(index: RaglineConfig) -> None:
    assert_one_line_error(search_cli(index, "x" * 10_000), "10,000 characters", "limit is 4,000")


@pytest.mark.parametrize("query", ["", "   ", "\x00", "\x00\x00 \t", "\u202e", "\u200b\n"])
def test_a_query_of_nothing_printable_is_empty(engine: SearchEngine, query: str) -> None:
    with pytest.raises(QueryError, match=r"^the query is empty$"):
        engine.search(query, k=5)


def test_check_query_accepts_ordinary_text() -> None:
    for query in ["tomato", "🍅", "שלום עולם", "a" * MAX_QUERY_CHARS, "tomato\x00soup"]:
        check_query(query)


# ---- dates ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_dates_before_year_1000_and_up_to_9999(engine: SearchEngine, mode: str) -> None:
    everything = set(NOTES)
    assert paths(engine, mode, after=parse_date("0001-01-01", "--after")) == everything
    assert paths(engine, mode, after=parse_date("0999-12-31", "--after")) == everything
    assert paths(engine, mode, before=parse_date("9999-12-31", "--before")) == everything
    assert paths(engine, mode, before=parse_date("0500-01-01", "--before")) == set()
    assert paths(engine, mode, after=parse_date("9999-12-31T23:59:59", "--after")) == set()


def test_sql_timestamps_are_zero_padded() -> None:
    sql = SearchFilters(after=datetime(1, 1, 1), before=datetime(999, 5, 6)).normalized().to_sql()
    assert "'0001-01-01T00:00:00.000000'" in sql and "'0999-05-06T00:00:00.000000'" in sql


@pytest.mark.parametrize("mode", MODES)
def test_cli_after_year_one(index: RaglineConfig, mode: str) -> None:
    result = search_cli(index, COMMON, "--after", "0001-01-01", "--mode", mode)
    assert result.exit_code == 0, result.output
    assert "Top.md" in result.output


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--after", "9999-12-31T23:00:00-05:00"], ["--after", "out of range"]),
        (["--before", "0001-01-01T00:00:00+05:00"], ["--before", "out of range"]),
        (["--after", "2024-13-45"], ["--after '2024-13-45' is not a date"]),
        (["--after", "2024-02-30"], ["is not a date"]),
        (["--after", "2024-01-01T25:00"], ["is not a date"]),
        (["--after", "\x00"], ["is not a date"]),
        (["--before", ""], ["--before '' is not a date"]),  # not "no filter"
        (["--after", "2024-06-01", "--before", "2024-01-01"], ["is not before --before"]),
        (["--after", "2024-01-01", "--before", "2024-01-01"], ["is not before --before"]),
    ],
)
def test_cli_bad_dates_are_one_line(
    index: RaglineConfig, args: list[str], fragments: list[str]
) -> None:
    assert_one_line_error(search_cli(index, COMMON, *args), *fragments)


# ---- path filters -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (".hidden", {".hidden/Secret.md"}),  # was stripped to "hidden" by lstrip("./")
        ("./.hidden/", {".hidden/Secret.md"}),
        (".hidden\\", {".hidden/Secret.md"}),  # a Windows separator
        ("hidden", {"hidden/Open.md"}),
        ("/hidden/", {"hidden/Open.md"}),  # relative to the source root
        ("hidden/*", {"hidden/Open.md"}),  # a prefix already matches what is below
        ("projects\\Alpha.md", {"projects/Alpha.md"}),
        ("*", set(NOTES)),
        ("./", set(NOTES)),
        ("nothing/*?[", set()),  # other wildcards are literal characters
    ],
)
def test_path_filters(engine: SearchEngine, mode: str, prefix: str, expected: set[str]) -> None:
    assert paths(engine, mode, path_prefix=prefix) == expected


@pytest.mark.parametrize("mode", MODES)
def test_long_path_filters(engine: SearchEngine, mode: str) -> None:
    assert paths(engine, mode, path_prefix=f"{DEEP}/one") == {f"{DEEP}/one/Deep.md"}
    assert paths(engine, mode, path_prefix=f"{DEEP}/t") == {f"{DEEP}/two/Deeper.md"}
    assert len(paths(engine, mode, path_prefix=DEEP)) == 2
    assert paths(engine, mode, path_prefix="x" * 4_000) == set()
    with pytest.raises(FilterError, match="path filter is 4,097 characters long; the limit is"):
        paths(engine, mode, path_prefix="x" * 4_097)


def test_bm25_path_filter_matches_names_with_newlines(tmp_path: Path) -> None:
    index = FulltextIndex(tmp_path / "fulltext")
    rows = [
        {"chunk_id": f"{i:032x}", "doc_id": f"d{i}", "source": "s", "path": path, "text": "tomato",
         "row_hash": "h", "modified": datetime(2024, 1, 1, tzinfo=UTC)}
        for i, path in enumerate(["odd\nname.md", "odd.md", "other.md"])
    ]  # fmt: skip
    index.replace([], rows)
    hits = index.search("tomato", SearchFilters(path_prefix="odd"), 10)
    assert {hit.chunk_id for hit in hits} == {f"{0:032x}", f"{1:032x}"}


@pytest.mark.parametrize("prefix", ["..", "../notes", "hidden/../../etc", "..\\x"])
def test_path_filters_may_not_leave_the_source(engine: SearchEngine, prefix: str) -> None:
    with pytest.raises(FilterError, match="goes above the source's root"):
        engine.search(COMMON, k=5, filters=SearchFilters(path_prefix=prefix))


def test_cli_path_filters(index: RaglineConfig) -> None:
    hidden = search_cli(index, COMMON, "--path", ".hidden", "--json")
    assert hidden.exit_code == 0, hidden.output
    assert '".hidden/Secret.md"' in hidden.output and "Open.md" not in hidden.output
    assert_one_line_error(search_cli(index, COMMON, "--path", "../x"), "goes above")


def test_normalize_path_prefix_is_idempotent() -> None:
    for raw in [".hidden", "./a//b/", "\\a\\b", "a/./b", "/x/*", "*", ".", "", "a b/ü"]:
        once = normalize_path_prefix(raw)
        assert normalize_path_prefix(once) == once
    assert normalize_path_prefix("a//b/./c/") == "a/b/c/"
    assert normalize_path_prefix(".") is None


# ---- everything else one could type -------------------------------------------------

NASTY = [
    '"unbalanced', "title:", "title:[a TO b]", "modified:[0 TO 99999999999999999999999]",
    "modified:abc", "text:/(.*a){30}/", "text:/.{1000}/", "unknown:field", "*", "*:*",
    "?", "((((((((((", "))", "AND", "a AND", "+-", "^2", "~", '"', '""', "\\", "\\\\:",
    "zanzibar\x00plover", "\u202eשלום zanzibar", "🍅" * 50, "日本語の検索", "\t\nzanzibar",
    "title:IN [a b c]", "text:(zanzibar plover)", "path:.hidden*", "tags:*", "q " * 1999,
]  # fmt: skip


@pytest.mark.parametrize("query", NASTY)
def test_nasty_queries_never_crash_the_cli(index: RaglineConfig, query: str) -> None:
    for mode in ("bm25", "hybrid"):
        result = search_cli(index, query, "--mode", mode)
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["hello \udcff world"],
        ["hello", "--path", "\udcff"],
        ["hello", "--tag", "caf\udce9"],
        ["hello", "--source", "\udcff"],
    ],
)
def test_bytes_that_are_not_utf8_are_one_line(index: RaglineConfig, args: list[str]) -> None:
    """A shell passes undecodable bytes as lone surrogates (`printf 'hello \\xff'`); they
    crashed the tokenizer, Tantivy and the terminal."""
    assert_one_line_error(search_cli(index, *args), "not valid UTF-8")


def test_filters_do_not_change_bm25_scores(tmp_path: Path) -> None:
    # A tag filter used to add the tag term's own BM25, which differs with how many
    # tags a note has, and so reordered the hits.
    index = FulltextIndex(tmp_path / "fulltext")
    rows = [
        {"chunk_id": f"{i:032x}", "doc_id": f"d{i}", "source": "s", "path": f"n{i}.md",
         "text": "tomato " * (i + 1), "tags": tags, "row_hash": "h",
         "modified": datetime(2024, 1, 1, tzinfo=UTC)}
        for i, tags in enumerate([["garden"], ["garden", "a", "b", "c", "d"], ["garden", "x"]])
    ]  # fmt: skip
    index.replace([], rows)
    plain = {hit.chunk_id: hit.score for hit in index.search("tomato", SearchFilters(), 10)}
    tagged = {
        hit.chunk_id: hit.score
        for hit in index.search("tomato", SearchFilters(tags=("garden",), sources=("s",)), 10)
    }
    assert tagged == pytest.approx(plain)
