"""hybrid_search on the sample index: modes, every filter, errors, JSON contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from rag_serving.config import RaglineConfig
from rag_serving.search import SearchEngine, SearchFilters
from rag_sources.errors import FilterError
from ragline.cli import cli


@pytest.fixture(scope="module")
def engine(sample_index: RaglineConfig) -> SearchEngine:
    return SearchEngine(sample_index)


def _paths(result) -> list[str]:
    return [h.path for h in result.hits]


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "vector"])
def test_each_mode_finds_the_right_note(engine: SearchEngine, mode: str) -> None:
    result = engine.search("kubectl rollout undo deployment", k=3, mode=mode)
    assert result.hits[0].path == "Kubernetes.md"
    assert result.hits[0].anchor == "Rolling updates"  # the note is one chunk: common heading
    assert set(result.hits[0].explain) == ({"bm25", "vector"} if mode == "hybrid" else {mode})


def test_paraphrase_needs_the_vector_side(engine: SearchEngine) -> None:
    query = "how much should I spend on food each month"
    assert _paths(engine.search(query, k=1, mode="vector")) == ["finance/Budget.md"]
    assert _paths(engine.search(query, k=1, mode="hybrid")) == ["finance/Budget.md"]


def test_hits_carry_citeable_fields_and_highlighted_snippets(engine: SearchEngine) -> None:
    hit = engine.search("flour water hydration", k=1).hits[0]
    assert hit.path == "Sourdough starter.md" and hit.title == "Sourdough starter care"
    assert hit.source == "notes" and hit.kind == "markdown"
    assert hit.line_start == 7 and hit.line_end >= 15  # body starts after the frontmatter
    assert "**flour**" in hit.snippet and "**hydration**" in hit.snippet
    assert hit.chunk_id and hit.doc_id and hit.indexed_at is not None


def test_filter_by_source_and_kind(engine: SearchEngine) -> None:
    result = engine.search("learning", k=10, filters=SearchFilters(sources=("journal",)))
    assert result.hits and {h.source for h in result.hits} == {"journal"}
    result = engine.search("learning", k=10, filters=SearchFilters(kinds=("markdown",)))
    assert {h.kind for h in result.hits} == {"markdown"}


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_filter_by_path_prefix(engine: SearchEngine, mode: str) -> None:
    result = engine.search(
        "plants and soil", k=10, mode=mode, filters=SearchFilters(path_prefix="gardening/")
    )
    assert result.hits and all(h.path.startswith("gardening/") for h in result.hits)


@pytest.mark.parametrize("mode", ["bm25", "vector"])
def test_filter_by_tag_including_nested_and_inline(engine: SearchEngine, mode: str) -> None:
    food = engine.search("jar fridge", k=10, mode=mode, filters=SearchFilters(tags=("food",)))
    assert food.hits and {h.path for h in food.hits} == {
        "Sourdough starter.md"
    }  # food/bread ⊂ food
    soil = engine.search("heap", k=10, mode=mode, filters=SearchFilters(tags=("#soil",)))
    assert {h.path for h in soil.hits} == {"gardening/Compost.md"}  # inline #soil
    both = engine.search(
        "pods", k=10, mode=mode, filters=SearchFilters(tags=("devops", "devops/k8s"))
    )
    assert {h.path for h in both.hits} == {"Kubernetes.md"}


@pytest.mark.parametrize("mode", ["bm25", "vector"])
def test_filter_by_modified_dates(engine: SearchEngine, mode: str) -> None:
    after = engine.search(
        "learning hiking",
        k=10,
        mode=mode,
        filters=SearchFilters(sources=("journal",), after=datetime(2024, 1, 1, tzinfo=UTC)),
    )
    assert {h.path for h in after.hits} == {"2024-06-02.md"}
    before = engine.search(
        "learning hiking",
        k=10,
        mode=mode,
        filters=SearchFilters(sources=("journal",), before=datetime(2024, 1, 1)),
    )
    assert {h.path for h in before.hits} == {"2023-01-15.md"}


def test_unknown_source_and_tag_fail_with_close_matches(engine: SearchEngine) -> None:
    with pytest.raises(FilterError, match="did you mean 'journal'"):
        engine.search("x", filters=SearchFilters(sources=("jounral",)))
    with pytest.raises(FilterError, match="did you mean 'garden'"):
        engine.search("x", filters=SearchFilters(tags=("gardn",)))
    with pytest.raises(FilterError, match="unknown kind"):
        engine.search("x", filters=SearchFilters(kinds=("pdf",)))
    with pytest.raises(FilterError, match="not before"):
        engine.search(
            "x", filters=SearchFilters(after=datetime(2025, 1, 1), before=datetime(2024, 1, 1))
        )


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "title:", "AND OR NOT", "(((", "a:b:c", "*", "-", "c++ error: foo", "[[Budget#Groceries]]",
     "\\", "~2", "field:[1 TO", "^", "🍅 tomato",
     # issue 13: field:* on a field that is not fast, syntax the searcher refuses, odd text
     "title:*", "text:*", "tags:*", "(title:*)", "//:*", "NOT?modified:*", "facets: * x",
     "title:[a TO b]", "modified:abc", "text:/(.*a){30}/", "*:*", "tomato\x00soup",
     "\u202eשלום", "q " * 1999],
)  # fmt: skip
@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_query_syntax_never_crashes(engine: SearchEngine, query: str, mode: str) -> None:
    result = engine.search(query, k=5, mode=mode)
    assert isinstance(result.hits, list)


def test_words_survive_stray_syntax(engine: SearchEngine) -> None:
    assert _paths(engine.search('error: "glacier', k=1, mode="bm25")) == ["2023-01-15.md"]


def test_explain_shows_the_chunk_and_document_bm25_behind_a_keyword_score(
    engine: SearchEngine, sample_index: RaglineConfig
) -> None:
    """A query of 4 words or more scores each keyword hit by its document's BM25 and its
    own: --explain shows both, not only their mix; a short query's score is its own."""
    query = "crossed a glacier in the Alps"
    top = engine.search(query, k=1, mode="bm25").hits[0]
    assert top.path == "2023-01-15.md"
    parts = top.explain["bm25"]
    assert parts["chunk_bm25"] > 0 and parts["document_bm25"] > 0
    assert parts["score"] != pytest.approx(parts["chunk_bm25"])  # the mix, shares of the best
    assert "chunk_bm25" not in engine.search("glacier", k=1, mode="bm25").hits[0].explain["bm25"]
    shown = CliRunner().invoke(
        cli,
        [
            "--config",
            str(sample_index.config_path),
            "search",
            query,
            "-k",
            "1",
            "--mode",
            "bm25",
            "--explain",
        ],
    )
    assert shown.exit_code == 0, shown.output
    assert (
        f"from chunk BM25 {parts['chunk_bm25']:.2f} and document {parts['document_bm25']:.2f}"
        in (" ".join(shown.output.split()))
    )


def test_cli_json_contract(sample_index: RaglineConfig) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "--config",
            str(sample_index.config_path),
            "search",
            "borrow checker",
            "--k",
            "2",
            "--json",
            "--explain",
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["query"] == "borrow checker"
    hit = data["hits"][0]
    for key in (
        "rank",
        "score",
        "source",
        "kind",
        "path",
        "title",
        "anchor",
        "snippet",
        "chunk_id",
        "doc_id",
    ):
        assert key in hit
    assert hit["path"] == "2024-06-02.md" and hit["rank"] == 1
    assert {"bm25", "vector"} <= set(hit["explain"])
    assert len(data["hits"]) <= 2


def test_cli_filter_errors_exit_2(sample_index: RaglineConfig) -> None:
    runner = CliRunner()
    base = ["--config", str(sample_index.config_path), "search", "x"]
    bad_tag = runner.invoke(cli, [*base, "--tag", "bakng"])
    assert bad_tag.exit_code == 2 and "baking" in bad_tag.output
    bad_date = runner.invoke(cli, [*base, "--after", "last tuesday"])
    assert bad_date.exit_code == 2 and "YYYY-MM-DD" in bad_date.output


def test_cli_human_output(sample_index: RaglineConfig) -> None:
    result = CliRunner().invoke(
        cli, ["--config", str(sample_index.config_path), "search", "glacier", "--explain"]
    )
    assert result.exit_code == 0
    assert "2023-01-15.md" in result.output and "explain:" in result.output


def test_cli_search_help_says_what_the_filters_match() -> None:
    """--author matches message senders, dates are each item's own, --type takes the
    aliases --language takes (issue 27 item 13)."""
    text = " ".join(CliRunner().invoke(cli, ["search", "--help"]).output.split())
    assert "commits, messages (by sender), books or feed entries" in text
    assert "files modified (commits made)" not in text
    assert "each item's own date (a commit's, a message's Date, a feed entry's" in text
    assert "a code file's language (python, or py)" in text
    assert "a hit shows the one that matched" in text
