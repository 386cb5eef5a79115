"""Indexing through the CLI's Dagster path: runs recorded in the project instance,
broken files recorded and skipped, incremental runs, status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from rag_serving.config import RaglineConfig
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import Generation, read_manifest
from rag_serving.index.store import IndexStore
from rag_serving.status import index_status
from ragline.cli import cli
from tests.conftest import build_index, write_config
from tests.sample_vault import BROKEN_FILES, NOTES


def active(config: RaglineConfig) -> Generation:
    generation = read_manifest(IndexLayout(config.data_dir).manifest_path).active
    assert generation is not None
    return generation


def test_every_good_note_is_indexed_and_ignored_folders_are_not(
    sample_index: RaglineConfig,
) -> None:
    store = IndexStore(sample_index.data_dir)
    paths = set(store.read("documents", columns=["path"]).column("path").to_pylist())
    assert set(NOTES) <= paths
    assert not any(p.startswith((".obsidian/", ".trash/", "drafts/")) for p in paths)
    assert not paths & set(BROKEN_FILES)


def test_broken_files_are_recorded_not_fatal(sample_index: RaglineConfig) -> None:
    status = {s.name: s for s in index_status(sample_index).sources}
    issues = {i.path: i for i in status["notes"].issues}
    assert issues["invalid utf8.md"].severity == "error"
    assert "UTF-8" in issues["invalid utf8.md"].message
    assert issues["binary.md"].severity == "skipped"
    assert issues["empty.md"].severity == "skipped"
    assert issues["Broken frontmatter.md"].severity == "warning"
    assert "frontmatter" in issues["Broken frontmatter.md"].message.lower()
    assert status["notes"].documents == len(NOTES)
    assert status["notes"].last_indexed_at is not None


def test_runs_are_recorded_in_the_project_dagster_instance(sample_index: RaglineConfig) -> None:
    from dagster import DagsterInstance

    home = IndexLayout(sample_index.data_dir).dagster_home
    assert (home / "dagster.yaml").is_file()
    instance = DagsterInstance.from_config(str(home))
    runs = instance.get_runs()
    assert {r.tags.get("dagster/partition") for r in runs} >= {"notes", "journal"}
    assert all(r.job_name == "index_source" for r in runs)
    assert set(instance.get_dynamic_partitions("sources")) == {"notes", "journal"}


def test_lancedb_and_tantivy_hold_the_same_chunks(sample_index: RaglineConfig) -> None:
    store = IndexStore(sample_index.data_dir)
    generation = active(sample_index)
    lance_ids = set(
        store.read(generation.table, columns=["chunk_id"]).column("chunk_id").to_pylist()
    )
    tantivy_ids = set(
        FulltextIndex(IndexLayout(sample_index.data_dir).fulltext_dir(generation.key)).row_hashes()
    )
    assert lance_ids and lance_ids == tantivy_ids


def test_fulltext_rebuild_from_lancedb_is_identical(
    sample_index: RaglineConfig, tmp_path: Path
) -> None:
    from rag_assets.stages.fulltext import fulltext_rows

    store = IndexStore(sample_index.data_dir)
    generation = active(sample_index)
    rebuilt = FulltextIndex.rebuild(tmp_path / "ft", fulltext_rows(store, generation.table, None))
    original = FulltextIndex(IndexLayout(sample_index.data_dir).fulltext_dir(generation.key))
    assert rebuilt.row_hashes() == original.row_hashes()


def test_incremental_edit_delete_and_cli_exit_codes(tmp_path: Path, sample_vault: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(sample_vault / "notes", vault, ignore=shutil.ignore_patterns("drafts"))
    config_path = write_config(
        tmp_path, [{"name": "notes", "kind": "markdown", "path": str(vault)}]
    )
    config = build_index(config_path)
    store = IndexStore(config.data_dir)
    table = active(config).table
    before = store.count(table)

    compost = vault / "gardening" / "Compost.md"
    compost.write_text(compost.read_text() + "\nWorms speed everything up.\n")
    (vault / "Kubernetes.md").unlink()
    runner = CliRunner()
    result = runner.invoke(cli, ["--config", str(config_path), "index", "--json"])
    assert result.exit_code == 0, result.output
    store = IndexStore(config.data_dir)  # a fresh reader sees the new versions
    outcome = json.loads(result.output)[0]
    files = outcome["assets"]["raw_files"]
    assert (files["changed"], files["deleted"], files["new"]) == (1, 1, 0)
    embeddings = outcome["assets"]["embeddings"]
    assert 1 <= embeddings["embedded"] <= 2  # only the edited chunk(s)
    paths = set(store.read("documents", columns=["path"]).column("path").to_pylist())
    assert "Kubernetes.md" not in paths
    assert store.count(table, "path = 'Kubernetes.md'") == 0
    assert store.count(table) < before
    hits = runner.invoke(
        cli, ["--config", str(config_path), "search", "maxSurge rolling update", "--json"]
    )
    assert all(h["path"] != "Kubernetes.md" for h in json.loads(hits.output)["hits"])

    # A source whose folder vanished stops `ragline index` before any run: exit code 2
    # and a clear message (the UI's runs report the source as unavailable instead).
    shutil.rmtree(vault)
    failed = runner.invoke(cli, ["--config", str(config_path), "index"])
    assert failed.exit_code == 2
    assert "does not exist" in failed.output
    # ...and nothing already indexed was lost.
    assert store.count("documents") == len(paths)


def test_status_json_lists_sources_and_errors(sample_index: RaglineConfig) -> None:
    result = CliRunner().invoke(
        cli, ["--config", str(sample_index.config_path), "status", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    notes = next(s for s in data["sources"] if s["name"] == "notes")
    assert notes["documents"] == len(NOTES) and notes["chunks"] > 0
    assert [e["path"] for e in notes["errors"]] == ["invalid utf8.md"]
    assert data["embedder"].startswith("sentence-transformers:all-MiniLM-L6-v2")
