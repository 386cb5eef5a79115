"""An index written by the previous release (format 2) is upgraded in place by the
next `ragline index`: new columns added, the Tantivy index rebuilt from LanceDB,
nothing re-embedded, and search then works with the new filters.

tests/fixtures/format2 holds a real format-2 index, written by ragline at commit
96e9a63 from the two notes beside it (LanceDB compacted; the ONNX export and the
Dagster instance left out: the new run makes them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lancedb
import pytest

from rag_serving.config import parse_config_file
from rag_serving.search import SearchEngine, SearchFilters
from rag_sources.errors import IndexNeedsUpgradeError
from rag_sources.formats.router import PARSER_VERSIONS
from ragline.indexing import index_sources
from tests.conftest import write_config

FIXTURE = Path(__file__).parent / "fixtures" / "format2"


def _served(data_dir: Path) -> dict[str, list[float]]:
    db = lancedb.connect(str(data_dir / "lancedb"))
    names = [n for n in db.list_tables().tables if n.startswith("chunks_")]
    assert len(names) == 1
    rows = db.open_table(names[0]).to_arrow().select(["chunk_id", "vector"]).to_pylist()
    return {r["chunk_id"]: r["vector"] for r in rows}


def test_format_2_index_is_upgraded_in_place_without_re_embedding(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(FIXTURE / "index", data_dir)
    vault = tmp_path / "vault"
    shutil.copytree(FIXTURE / "vault", vault)
    config = parse_config_file(
        write_config(
            tmp_path, [{"name": "notes", "kind": "markdown", "path": str(vault)}], data_dir
        )
    )
    before = _served(data_dir)
    leftover = data_dir / "fulltext" / "old-generation"  # awaiting removal, old schema
    shutil.copytree(next((data_dir / "fulltext").iterdir()), leftover)
    assert json.loads((data_dir / "index.json").read_text())["schema_version"] == 2

    with pytest.raises(IndexNeedsUpgradeError, match="run `ragline index` once"):
        SearchEngine(config)

    [outcome] = index_sources(config, [], full=False)
    assert outcome.success, outcome.error
    assert json.loads((data_dir / "index.json").read_text())["schema_version"] == 3
    assert not leftover.exists()
    embeddings = outcome.metadata["embeddings"]
    assert embeddings["embedded"] == 0  # every vector reused
    after = _served(data_dir)
    assert after.keys() == before.keys()
    assert all(after[c] == before[c] for c in before)

    engine = SearchEngine(config)
    hits = engine.search(
        "which river carries the most freight", filters=SearchFilters(types=("markdown",))
    ).hits
    assert hits and hits[0].path == "Rivers.md" and hits[0].file_type == "md"
    assert engine.search("Danube", mode="bm25").hits  # the rebuilt Tantivy index answers
    docs = engine.store.read("documents", columns=["file_type", "facets", "parser"]).to_pylist()
    assert {(d["file_type"], tuple(d["facets"]), d["parser"]) for d in docs} == {
        ("md", ("type:md",), PARSER_VERSIONS["md"])
    }
    # A second run has nothing left to do.
    [again] = index_sources(config, [], full=False)
    assert again.metadata["parsed_documents"]["unchanged"] == 2
    assert again.metadata["embeddings"]["changed"] == 0
