"""Asset checks, maintenance, concurrent writers, searches during indexing, and
recovery from a run killed with SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rag_assets import checks
from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore
from rag_serving.search import SearchEngine
from tests.conftest import HELP_SLICE, HELP_VAULT, build_index, write_config

REPO = Path(__file__).resolve().parents[1]


def _ragline(config_path: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("DAGSTER_HOME", None)
    return subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_asset_checks_pass_and_are_recorded(sample_index: RaglineConfig) -> None:
    from dagster import AssetKey, DagsterInstance

    instance = DagsterInstance.from_config(str(IndexLayout(sample_index.data_dir).dagster_home))
    for asset, names in {
        "embeddings": [checks.CHUNKS_HAVE_DOCUMENTS, checks.VECTORS_HAVE_RECORDED_DIMENSION,
                       checks.ONE_EMBEDDER_FINGERPRINT],
        "fulltext_index": [checks.TANTIVY_MATCHES_LANCEDB],
    }.items():  # fmt: skip
        from dagster import AssetCheckKey

        for name in names:
            record = instance.event_log_storage.get_latest_asset_check_execution_by_key(
                [AssetCheckKey(AssetKey(asset), name)]
            )
            execution = record[AssetCheckKey(AssetKey(asset), name)]
            assert execution.status.value == "SUCCEEDED", (asset, name)


def test_checks_detect_a_broken_index(tmp_path: Path, sample_vault: Path) -> None:
    config_path = write_config(
        tmp_path, [{"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")}]
    )
    config = build_index(config_path)
    store = IndexStore(config.data_dir)
    generation = read_manifest(IndexLayout(config.data_dir).manifest_path).active
    assert checks.tantivy_matches_lancedb(store, generation, "journal").passed
    victim = store.read(generation.table, columns=["chunk_id"]).column("chunk_id")[0].as_py()
    fulltext = FulltextIndex(IndexLayout(config.data_dir).fulltext_dir(generation.key))
    writer = fulltext.index.writer(heap_size=15_000_000, num_threads=1)
    writer.delete_documents_by_term("chunk_id", victim)
    writer.commit()
    writer.wait_merging_threads()
    broken = checks.tantivy_matches_lancedb(store, generation, "journal")
    assert not broken.passed and broken.metadata["missing_in_tantivy"] == 1
    store.delete("documents", "path = '2023-01-15.md'")
    orphans = checks.chunks_have_documents(store, generation, "journal")
    assert not orphans.passed
    # The next run repairs both.
    build_index(config_path, full=True)
    store = IndexStore(config.data_dir)
    assert checks.tantivy_matches_lancedb(store, generation, "journal").passed
    assert checks.chunks_have_documents(store, generation, "journal").passed


def test_a_whole_document_row_out_of_step_fails_the_check_until_a_run_remakes_it(
    tmp_path: Path, sample_vault: Path
) -> None:
    """The documents' index (one row per whole document, for the keyword side) is
    checked against the chunks as they are indexed, and an ordinary run repairs it."""
    from rag_serving.index.fulltext import document_key

    config_path = write_config(
        tmp_path, [{"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")}]
    )
    config = build_index(config_path)
    store = IndexStore(config.data_dir)
    generation = read_manifest(IndexLayout(config.data_dir).manifest_path).active
    fulltext = FulltextIndex(IndexLayout(config.data_dir).fulltext_dir(generation.key))
    doc_id = store.read("documents", columns=["doc_id"]).column("doc_id")[0].as_py()
    writer = fulltext.documents.writer(heap_size=15_000_000, num_threads=1)
    writer.delete_documents_by_term("chunk_id", document_key(doc_id))
    writer.commit()
    writer.wait_merging_threads()
    broken = checks.tantivy_matches_lancedb(store, generation, "journal")
    assert not broken.passed, broken
    assert broken.metadata["documents_out_of_step"] == 1
    assert broken.metadata["missing_in_tantivy"] == broken.metadata["different_rows"] == 0
    assert broken.description == "1 whole-document row(s) differ from their chunks"
    build_index(config_path)  # nothing changed on disk
    repaired = checks.tantivy_matches_lancedb(store, generation, "journal")
    assert repaired.passed and repaired.metadata["documents_out_of_step"] == 0


def test_maintenance_compacts_and_keeps_results(tmp_path: Path, sample_vault: Path) -> None:

    from rag_assets.definitions import defs
    from rag_assets.instance import open_instance

    config_path = write_config(
        tmp_path, [{"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")}]
    )
    config = build_index(config_path)
    build_index(config_path, full=True)
    before = SearchEngine(config).search("glacier", k=3)
    os.environ["RAGLINE_CONFIG"] = str(config_path)
    instance = open_instance(config.data_dir)
    import tomli_w

    raw = {"data_dir": str(config.data_dir), "freshness": {"keep_versions_hours": 0},
           "sources": [{"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")}]}  # fmt: skip
    config_path.write_bytes(tomli_w.dumps(raw).encode())
    store = IndexStore(config.data_dir)
    generation = read_manifest(IndexLayout(config.data_dir).manifest_path).active
    versions_before = len(store.table(generation.table).list_versions())
    result = defs.resolve_job_def("maintenance_job").execute_in_process(instance=instance)
    assert result.success
    store = IndexStore(config.data_dir)
    assert len(store.table(generation.table).list_versions()) < versions_before
    after = SearchEngine(config).search("glacier", k=3)
    assert [h.chunk_id for h in after.hits] == [h.chunk_id for h in before.hits]


@pytest.mark.shared_data
def test_two_sources_index_concurrently_while_searching(tmp_path: Path, sample_vault: Path) -> None:
    sources = [
        {"name": "help", "kind": "markdown", "path": str(HELP_VAULT), "include": ["Linking notes and files/**", "Files and folders/**"]},
        {"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")},
    ]  # fmt: skip
    config_path = write_config(tmp_path, sources)
    build_index(config_path)  # both sources searchable before the concurrent runs
    config = parse_config_file(config_path)
    (tmp_path / "extra").mkdir()
    errors: list[BaseException] = []
    seen: list[int] = []
    stop = threading.Event()

    def search_loop() -> None:
        engine = SearchEngine(config)
        while not stop.is_set():
            try:
                result = engine.search("link to a heading", k=10)
                ids = [h.chunk_id for h in result.hits]
                assert len(ids) == len(set(ids))
                seen.append(len(ids))
            except BaseException as exc:
                errors.append(exc)

    thread = threading.Thread(target=search_loop)
    thread.start()
    try:
        runs = [_ragline(config_path, "index", "--full", name) for name in ("help", "journal")]
        outputs = [p.communicate(timeout=400) for p in runs]
    finally:
        stop.set()
        thread.join()
    assert [p.returncode for p in runs] == [0, 0], outputs
    assert not errors, errors[:3]
    assert seen and min(seen) > 0


@pytest.mark.shared_data
def test_sigkill_mid_run_is_repaired_by_the_next_run(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for pattern in HELP_SLICE:
        folder = pattern.split("/")[0]
        shutil.copytree(HELP_VAULT / folder, vault / folder)
    config_path = write_config(
        tmp_path / "killed", [{"name": "help", "kind": "markdown", "path": str(vault)}]
    )
    config = parse_config_file(config_path)
    store_dir = config.data_dir
    process = _ragline(config_path, "index")
    deadline = time.time() + 300
    killed = False
    while time.time() < deadline and process.poll() is None:
        manifest = IndexLayout(store_dir).manifest_path
        if manifest.exists():
            generation = read_manifest(manifest).active
            store = IndexStore(store_dir)
            if (
                generation
                and store.table_exists(generation.table)
                and store.count(generation.table) > 0
            ):
                process.send_signal(signal.SIGKILL)
                killed = True
                break
        time.sleep(0.2)
    process.wait(timeout=30)
    assert killed, "the run finished before it could be killed; use a larger slice"

    repaired = build_index(config_path)
    reference = build_index(
        write_config(tmp_path / "clean", [{"name": "help", "kind": "markdown", "path": str(vault)}])
    )

    def snapshot(cfg: RaglineConfig) -> tuple[dict[str, str], dict[str, str]]:
        generation = read_manifest(IndexLayout(cfg.data_dir).manifest_path).active
        rows = (
            IndexStore(cfg.data_dir)
            .read(generation.table, columns=["chunk_id", "row_hash"])
            .to_pylist()
        )
        lance = {r["chunk_id"]: r["row_hash"] for r in rows}
        tantivy = FulltextIndex(IndexLayout(cfg.data_dir).fulltext_dir(generation.key)).row_hashes()
        return lance, tantivy

    lance, tantivy = snapshot(repaired)
    ref_lance, _ = snapshot(reference)
    assert lance == ref_lance and tantivy == lance
    assert IndexStore(repaired.data_dir).count("documents") == IndexStore(reference.data_dir).count(
        "documents"
    )
    assert json.dumps(sorted(lance)) == json.dumps(sorted(ref_lance))
