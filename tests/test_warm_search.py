"""A warm engine (issue 15, item 2) answers exactly as a cold one: from its second
search on it scans the vectors in memory, takes hit rows by row id and reads the
staleness tables once per version — and sees what a later run writes."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.search import SearchEngine, SearchFilters
from tests.conftest import build_index, write_config

QUERIES = ["tomato seedlings", "how to plan a trip", "meeting notes", "garden", "recipe"]


def _answer(engine: SearchEngine, query: str, mode: str, **filters: object) -> list[tuple]:
    result = engine.search(query, k=8, mode=mode, filters=SearchFilters(**filters))  # type: ignore[arg-type]
    # Scores to 3 places: numpy and LanceDB differ in the last float bits.
    return [(h.chunk_id, round(h.score, 3), h.title, h.line_start, h.stale) for h in result.hits]


def _journal_index(tmp_path: Path, sample_vault: Path) -> tuple[Path, Path, RaglineConfig]:
    """A copy of the sample journal, indexed: its folder, config path and config."""
    vault = tmp_path / "vault"
    shutil.copytree(sample_vault / "journal", vault)
    config_path = write_config(tmp_path, [{"name": "j", "kind": "markdown", "path": str(vault)}])
    return vault, config_path, build_index(config_path)


def _warmed(engine: SearchEngine) -> SearchEngine:
    """``engine`` after a search per query: its in-memory paths start at the second."""
    for query in QUERIES:
        engine.search(query)
    return engine


@pytest.mark.parametrize("mode", ["hybrid", "vector", "bm25"])
def test_a_warm_engine_answers_as_a_cold_one(sample_index: RaglineConfig, mode: str) -> None:
    warm = SearchEngine(sample_index)
    for query in QUERIES:
        warm.search(query)  # warm it up: the in-memory paths start at the second search
    assert warm._memory._matrix is not None  # the vectors are in memory
    for query in QUERIES:
        cold = SearchEngine(sample_index)
        assert _answer(warm, query, mode) == _answer(cold, query, mode)
        assert _answer(warm, query, mode, sources=("journal",)) == _answer(
            cold, query, mode, sources=("journal",)
        )
        assert _answer(warm, query, mode, kinds=("markdown",)) == _answer(
            cold, query, mode, kinds=("markdown",)
        )


def test_a_filter_memory_cannot_apply_goes_to_lancedb(sample_index: RaglineConfig) -> None:
    warm = SearchEngine(sample_index)
    for query in QUERIES:
        warm.search(query)
    cold = SearchEngine(sample_index)
    for query in QUERIES:
        assert _answer(warm, query, "vector", path_prefix="projects/") == _answer(
            cold, query, "vector", path_prefix="projects/"
        )


def test_a_warm_engine_sees_a_later_run(tmp_path: Path, sample_vault: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(sample_vault / "journal", vault)
    config_path = write_config(tmp_path, [{"name": "j", "kind": "markdown", "path": str(vault)}])
    config = build_index(config_path)
    warm = SearchEngine(config)
    for query in QUERIES:
        warm.search(query)
    (vault / "Zeppelin.md").write_text("# Zeppelin\n\nA quokka rides the zeppelin at dawn.\n")
    build_index(config_path)
    deadline = time.monotonic() + 10
    found: list[str] = []
    while time.monotonic() < deadline:
        found = [h.path for h in warm.search("quokka zeppelin", k=3, mode="vector").hits]
        if found and found[0] == "Zeppelin.md":
            break
        time.sleep(0.2)
    assert found[0] == "Zeppelin.md"
    fresh = SearchEngine(parse_config_file(config_path))
    assert _answer(warm, "quokka zeppelin", "hybrid") == _answer(fresh, "quokka zeppelin", "hybrid")
    # A file changed after the run: the warm engine flags it as a cold one does.
    (vault / "Zeppelin.md").write_text("# Zeppelin\n\nChanged since it was indexed.\n")
    assert warm.search("quokka zeppelin", k=1).hits[0].stale == "modified"


def test_rows_by_offset_when_the_vectors_are_not_held(
    tmp_path: Path, sample_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the in-memory sizes (lowered here to nothing) a warm engine takes its
    hits' rows by offset; they match a cold engine's, and after a run that deletes
    notes (every later row's offset moves) they still come back right."""
    from rag_serving.search import vectors

    monkeypatch.setattr(vectors, "MAX_ROWS", 0)
    monkeypatch.setattr(vectors, "ROW_BUDGET_BYTES", 0)
    vault, config_path, config = _journal_index(tmp_path, sample_vault)
    warm = _warmed(SearchEngine(config, read_consistency_s=0))
    assert warm._memory._matrix is None and warm._locator._key is not None
    for mode in ("hybrid", "vector", "bm25"):
        for query in QUERIES:
            assert _answer(warm, query, mode) == _answer(SearchEngine(config), query, mode)
    notes = sorted(vault.glob("*.md"))
    for note in notes[: len(notes) // 2]:
        note.unlink()
    build_index(config_path)
    fresh = SearchEngine(parse_config_file(config_path))
    for query in QUERIES:
        assert _answer(warm, query, "bm25") == _answer(fresh, query, "bm25")
        assert _answer(warm, query, "hybrid") == _answer(fresh, query, "hybrid")


def test_a_later_version_is_reloaded_in_the_background(tmp_path: Path, sample_vault: Path) -> None:
    """After a run, the first warm search does not wait for the vectors to reload:
    LanceDB answers it (already with the new note) while the matrix of the new
    version loads beside it; then the matrix serves again, equal to a cold engine."""
    vault, config_path, config = _journal_index(tmp_path, sample_vault)
    warm = _warmed(SearchEngine(config, read_consistency_s=0))
    before = warm._memory._held
    assert before[2] is not None
    (vault / "Zeppelin.md").write_text("# Zeppelin\n\nA quokka rides the zeppelin at dawn.\n")
    build_index(config_path)
    first = warm.search("quokka zeppelin", k=3, mode="vector")
    assert first.hits[0].path == "Zeppelin.md"
    warm._memory.wait_for_reload(60)
    name, version, matrix = warm._memory._held
    assert name == before[0] and version is not None and version > (before[1] or 0)
    assert matrix is not None and first.hits[0].chunk_id in matrix.positions
    fresh = SearchEngine(parse_config_file(config_path))
    for mode in ("vector", "hybrid"):
        assert _answer(warm, "quokka zeppelin", mode) == _answer(fresh, "quokka zeppelin", mode)


@pytest.mark.parametrize("mode", ["hybrid", "vector", "bm25"])
def test_rows_alone_are_held_when_the_vectors_are_not(
    sample_index: RaglineConfig, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Above the vector limit (lowered here to 0 rows) the hits' columns are still held
    while they fit the byte budget: vector search goes to LanceDB, the rows come from
    memory, and the answers are a cold engine's."""
    from rag_serving.search import vectors

    monkeypatch.setattr(vectors, "MAX_ROWS", 0)
    warm = SearchEngine(sample_index)
    for query in QUERIES:
        warm.search(query, mode=mode)  # type: ignore[arg-type]
    held = warm._memory._matrix
    assert held is not None and held.vectors is None and held.rows.num_rows > 0
    assert warm._locator._key is None  # never needed
    for query in QUERIES:
        assert _answer(warm, query, mode) == _answer(SearchEngine(sample_index), query, mode)


def test_held_rows_never_answer_for_chunks_they_lack(sample_index: RaglineConfig) -> None:
    """A chunk the held copy lacks (the full-text index saw a newer run than the copy)
    sends the rows to LanceDB (None), and no ids at all is no rows, not an error."""
    warm = SearchEngine(sample_index)
    for query in QUERIES:
        warm.search(query)
    held = warm._memory._matrix
    assert held is not None
    known = held.ids[:3]
    assert set(warm._memory.rows(known, held.version) or {}) == set(known)
    assert warm._memory.rows([known[0], "f" * 32], held.version) is None
    assert warm._memory.rows([], held.version) == {}
    assert warm._memory.rows(known, held.version + 1) is None
