"""Incremental indexing: edits re-embed only changed chunks, renames re-embed
nothing, deletes disappear everywhere, --full reuses vectors, stale hits are
flagged, status shows pending changes, removed sources are pruned, and an embedder
switch never leaves search without results."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import tomli_w
from click.testing import CliRunner

from rag_serving.config import parse_config_file
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore
from rag_serving.search import SearchEngine
from rag_serving.status import index_status
from ragline.cli import cli
from tests.conftest import write_config
from tests.ollama_standin import OllamaStandIn

TOPICS = [
    "glaciers carve valleys", "bees dance to share directions", "volcanoes vent sulphur",
    "owls hunt by sound", "tides follow the moon", "moss grows on north faces",
    "salmon return upstream", "lichens pioneer bare rock", "dunes migrate with wind",
    "coral builds reefs slowly", "bats echolocate insects", "ferns unfurl fiddleheads",
]  # fmt: skip


def long_note() -> str:
    sections = []
    for i, topic in enumerate(TOPICS):
        words = " ".join(f"{topic} in paragraph {i} sentence {j}." for j in range(12))
        sections.append(f"## Section {i}\n\n{words}\n")
    return "# Field notes\n\n" + "\n".join(sections)


def index_json(config_path: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["--config", str(config_path), "index", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def bump(path: Path) -> None:
    later = time.time() + 10
    os.utime(path, (later, later))


@pytest.fixture()
def vault_index(tmp_path: Path, sample_vault: Path) -> tuple[Path, Path]:
    vault = tmp_path / "vault"
    shutil.copytree(sample_vault / "notes", vault, ignore=shutil.ignore_patterns("drafts"))
    (vault / "Field notes.md").write_text(long_note())
    config_path = write_config(
        tmp_path, [{"name": "notes", "kind": "markdown", "path": str(vault)}]
    )
    index_json(config_path)
    return vault, config_path


def test_incremental_semantics(vault_index: tuple[Path, Path]) -> None:
    vault, config_path = vault_index
    config = parse_config_file(config_path)

    # Nothing changed: nothing parsed, chunked or embedded.
    quiet = index_json(config_path)[0]["assets"]
    assert quiet["raw_files"]["unchanged"] == quiet["raw_files"]["dagster/row_count"]
    assert quiet["parsed_documents"]["new"] + quiet["parsed_documents"]["changed"] == 0
    assert quiet["embeddings"]["embedded"] == 0

    # One paragraph of a long note edited: at most 2 chunks re-embedded.
    note = vault / "Field notes.md"
    note.write_text(note.read_text().replace("salmon return upstream in paragraph 6 sentence 3.",
                                             "salmon leap the weir in paragraph 6 sentence 3."))  # fmt: skip
    bump(note)
    edited = index_json(config_path)[0]["assets"]
    assert edited["raw_files"]["changed"] == 1
    assert 1 <= edited["embeddings"]["embedded"] <= 2
    hits = SearchEngine(config).search("salmon leap the weir", k=1, mode="bm25").hits
    assert hits[0].path == "Field notes.md"

    # A folder renamed: nothing re-embedded, paths updated.
    (vault / "gardening").rename(vault / "garden")
    moved = index_json(config_path)[0]["assets"]
    assert moved["raw_files"]["new"] == 2 and moved["raw_files"]["deleted"] == 2
    assert moved["embeddings"]["embedded"] == 0
    paths = {h.path for h in SearchEngine(config).search("compost heap", k=5).hits}
    assert "garden/Compost.md" in paths and not any(p.startswith("gardening/") for p in paths)

    # A deleted file disappears from LanceDB, Tantivy and results.
    (vault / "Kubernetes.md").unlink()
    index_json(config_path)
    store = IndexStore(config.data_dir)
    generation = read_manifest(IndexLayout(config.data_dir).manifest_path).active
    assert store.count(generation.table, "path = 'Kubernetes.md'") == 0
    fulltext = FulltextIndex(IndexLayout(config.data_dir).fulltext_dir(generation.key))
    assert not [h for h in fulltext.search("maxSurge", _no_filters(), 10)]
    assert all(
        h.path != "Kubernetes.md" for h in SearchEngine(config).search("kubectl rollout", k=10).hits
    )

    # --full rebuilds every stage but reuses every vector.
    full = index_json(config_path, "--full")[0]["assets"]
    # Nothing changed on disk: every document is redone, none is reported as changed.
    assert full["parsed_documents"]["rebuilt"] == full["parsed_documents"]["dagster/row_count"]
    assert full["parsed_documents"]["changed"] == 0 and full["chunks"]["changed"] == 0
    assert full["chunks"]["rebuilt"] > 0 and full["embeddings"]["changed"] == 0
    assert full["embeddings"]["embedded"] == 0
    assert full["embeddings"]["vectors_reused"] == full["embeddings"]["dagster/row_count"]


def _no_filters():
    from rag_serving.search import SearchFilters

    return SearchFilters()


def test_stale_hits_and_pending_changes(vault_index: tuple[Path, Path]) -> None:
    vault, config_path = vault_index
    config = parse_config_file(config_path)
    engine = SearchEngine(config)
    assert engine.search("glacier valleys", k=1).hits[0].stale is None

    note = vault / "Field notes.md"
    note.write_text(note.read_text() + "\nMore later.\n")
    bump(note)
    (vault / "finance" / "Budget.md").unlink()
    hit = engine.search("glaciers carve valleys", k=1).hits[0]
    assert hit.stale == "modified"
    budget = [
        h
        for h in engine.search("envelope budgeting income", k=5).hits
        if h.path == "finance/Budget.md"
    ]
    assert budget and budget[0].stale == "deleted"
    result = CliRunner().invoke(
        cli, ["--config", str(config_path), "search", "envelope income", "--json"]
    )
    data = json.loads(result.output)
    flagged = [h for h in data["hits"] if h["path"] == "finance/Budget.md"]
    assert flagged and flagged[0]["stale"] is True and flagged[0]["stale_reason"] == "deleted"

    pending = index_status(config).sources[0].pending
    assert pending is not None and (pending.changed, pending.deleted, pending.new) == (1, 1, 0)
    index_json(config_path)
    assert index_status(config).sources[0].pending.total == 0


def test_prune_removed_source(tmp_path: Path, sample_vault: Path) -> None:
    config_path = write_config(
        tmp_path,
        [{"name": "notes", "kind": "markdown", "path": str(sample_vault / "notes"), "exclude": ["drafts/**"]},
         {"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")}],
    )  # fmt: skip
    index_json(config_path)
    config = parse_config_file(config_path)
    write_config(tmp_path, [{"name": "notes", "kind": "markdown", "path": str(sample_vault / "notes"),
                             "exclude": ["drafts/**"]}])  # fmt: skip
    runner = CliRunner()
    dry = runner.invoke(cli, ["--config", str(config_path), "sources", "prune"])
    assert dry.exit_code == 1 and "journal" in dry.output and "--yes" in dry.output
    store = IndexStore(config.data_dir)
    assert store.count("documents", "source = 'journal'") == 2
    listed = runner.invoke(cli, ["--config", str(config_path), "sources", "list", "--json"])
    assert {
        "name": "journal",
        "kind": None,
        "path": None,
        "configured": False,
        "indexed": True,
    } in json.loads(listed.output)

    done = runner.invoke(cli, ["--config", str(config_path), "sources", "prune", "--yes"])
    assert done.exit_code == 0, done.output
    store = IndexStore(config.data_dir)
    generation = read_manifest(IndexLayout(config.data_dir).manifest_path).active
    for table in ("files", "documents", "staged_chunks", "source_state", generation.table):
        assert store.count(table, "source = 'journal'") == 0, table
    fulltext = FulltextIndex(IndexLayout(config.data_dir).fulltext_dir(generation.key))
    assert fulltext.row_hashes("journal") == {} and fulltext.row_hashes("notes")
    from dagster import DagsterInstance

    instance = DagsterInstance.from_config(str(IndexLayout(config.data_dir).dagster_home))
    assert instance.get_dynamic_partitions("sources") == ["notes"]


def test_embedder_switch_keeps_search_working(tmp_path: Path, sample_vault: Path) -> None:
    """The second embedder is the Ollama provider talking to a loopback stand-in
    server (no Ollama server can be installed here)."""
    sources = [
        {
            "name": "notes",
            "kind": "markdown",
            "path": str(sample_vault / "notes"),
            "exclude": ["drafts/**"],
        },
        {"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")},
    ]
    config_path = write_config(tmp_path, sources)
    index_json(config_path)
    old = read_manifest(IndexLayout(tmp_path / "data").manifest_path).active
    with OllamaStandIn() as server:
        config_path.write_bytes(tomli_w.dumps({
            "data_dir": str(tmp_path / "data"),
            "embedder": {"provider": "ollama", "host": server.host, "model": "nomic-embed-text"},
            "sources": sources,
        }).encode())  # fmt: skip
        config = parse_config_file(config_path)
        index_json(config_path, "journal")
        manifest = read_manifest(IndexLayout(config.data_dir).manifest_path)
        assert manifest.active == old and manifest.building is not None
        assert manifest.building.fingerprint.provider == "ollama"
        # Mid-switch: search still answers from the old vectors, in every mode.
        engine = SearchEngine(config)
        for mode in ("hybrid", "vector", "bm25"):
            assert engine.search("flour water starter", k=3, mode=mode).hits, mode
        assert engine.generation == old
        status = index_status(config, check_pending=False)
        assert status.building and "ollama" in status.building

        index_json(config_path, "notes")
        manifest = read_manifest(IndexLayout(config.data_dir).manifest_path)
        assert manifest.active.fingerprint.provider == "ollama" and manifest.building is None
        hits = engine.search(
            "flour water starter", k=3, mode="vector"
        ).hits  # same engine, no restart
        assert engine.generation == manifest.active and hits
        assert (
            engine.search("glacier mountain hut", k=1, mode="hybrid").hits[0].path
            == "2023-01-15.md"
        )


def test_a_host_without_the_source_files_says_it_cannot_check_them(
    tmp_path: Path, sample_vault: Path
) -> None:
    """A search host that has the index but not the source's folder (or a disk not
    mounted now): hits say their freshness is unchecked, not that every file was
    deleted; with the folder back, a deleted file is "deleted" again."""
    from tests.conftest import build_index

    journal = tmp_path / "journal"
    shutil.copytree(sample_vault / "journal", journal)
    config_path = write_config(
        tmp_path, [{"name": "journal", "kind": "markdown", "path": str(journal)}]
    )
    config = build_index(config_path)
    journal.rename(tmp_path / "elsewhere")
    hits = SearchEngine(config).search("journal", k=3).hits
    assert hits and {h.stale for h in hits} == {"unchecked"}
    result = CliRunner().invoke(cli, ["--config", str(config_path), "search", "journal", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)["hits"]
    assert {(h["stale"], h["stale_reason"]) for h in data} == {(False, "unchecked")}
    shown = CliRunner().invoke(cli, ["--config", str(config_path), "search", "journal"])
    assert "not checked for changes: the source's folder is not here" in shown.output
    assert "stale:" not in shown.output

    (tmp_path / "elsewhere").rename(journal)
    first = hits[0].path
    (journal / first).unlink()
    again = {h.path: h.stale for h in SearchEngine(config).search("journal", k=3).hits}
    assert again[first] == "deleted" and "unchecked" not in again.values()
