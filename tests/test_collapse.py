"""One hit per document (issue 31, item 5): a real index of a small vault where one
long note matches a query in every section."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rag_serving.config import RaglineConfig
from rag_serving.search import SearchEngine
from ragline.cli import cli
from tests.conftest import build_index, write_config

SECTIONS = [
    ("Turbine blades", "Turbine blades crack when the turbine overheats at full load."),
    ("Turbine bearings", "Turbine bearings wear when the turbine runs without oil."),
    ("Turbine seals", "Turbine seals leak steam when the turbine casing warps."),
    ("Turbine governor", "The turbine governor holds turbine speed against the load."),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    root = tmp_path_factory.mktemp("collapse")
    vault = root / "vault"
    vault.mkdir()
    body = "\n\n".join(
        f"## {head}\n\n{text}\n\n" + "Filler words here. " * 60 for head, text in SECTIONS
    )
    (vault / "turbine-manual.md").write_text(f"# Turbine manual\n\n{body}", encoding="utf-8")
    (vault / "pump.md").write_text("# Pump\n\nA turbine pump lifts water.\n", encoding="utf-8")
    (vault / "boiler.md").write_text(
        "# Boiler\n\nThe boiler feeds the turbine.\n", encoding="utf-8"
    )
    path = write_config(root, [{"name": "notes", "kind": "markdown", "path": str(vault)}])
    return build_index(path)


def test_one_hit_per_document_with_a_count_of_the_rest(index: RaglineConfig) -> None:
    engine = SearchEngine(index)
    page = engine.search("turbine", k=6, collapse=False, mode="bm25").hits
    assert sum(h.path == "turbine-manual.md" for h in page) >= 3  # it fills the page
    every = engine.search("turbine", k=50, collapse=False, mode="bm25").hits
    manual = [h for h in every if h.path == "turbine-manual.md"]
    hits = engine.search("turbine", k=6, mode="bm25").hits  # collapsed by default
    paths = [h.path for h in hits]
    assert len(paths) == len(set(paths)) == 3
    first = next(h for h in hits if h.path == "turbine-manual.md")
    assert first.chunk_id == manual[0].chunk_id  # its best chunk stands for it
    assert first.more_sections == len(manual) - 1
    assert all(h.more_sections == 0 for h in hits if h is not first)
    assert [h.rank for h in hits] == [1, 2, 3]


def test_collapsing_fills_k_with_documents_further_down(index: RaglineConfig) -> None:
    engine = SearchEngine(index)
    for mode in ("hybrid", "vector", "bm25"):
        hits = engine.search("turbine blades bearings seals", k=2, mode=mode).hits  # type: ignore[arg-type]
        assert len({h.doc_id for h in hits}) == len(hits) == 2, mode


def test_cli_and_mcp_ask_for_every_section(index: RaglineConfig) -> None:
    runner = CliRunner()
    config = str(index.config_path)
    shown = runner.invoke(cli, ["--config", config, "search", "turbine", "--mode", "bm25"])
    assert shown.exit_code == 0, shown.output
    assert "more matching sections here (--all-sections)" in shown.output
    out = runner.invoke(
        cli, ["--config", config, "search", "turbine", "--mode", "bm25", "--all-sections", "--json"]
    )
    hits = json.loads(out.output)["hits"]
    assert sum(h["path"] == "turbine-manual.md" for h in hits) >= 3
    assert all("more_sections" not in h for h in hits)


def test_the_mcp_search_tool_takes_collapse(index: RaglineConfig) -> None:
    from rag_serving.mcp.auth import Access
    from rag_serving.mcp.search import SearchRequest, VisibleVocabularies, run_search

    engine = SearchEngine(index)
    everyone = Access(user="local", sources=None)
    collapsed = run_search(
        engine, everyone, SearchRequest(query="turbine", mode="bm25"), VisibleVocabularies()
    )
    assert len({h.path for h in collapsed.hits}) == len(collapsed.hits)
    assert max(h.more_sections for h in collapsed.hits) >= 2
    request = SearchRequest(query="turbine", mode="bm25", collapse=False)
    every = run_search(engine, everyone, request, VisibleVocabularies())
    assert sum(h.path == "turbine-manual.md" for h in every.hits) >= 3
