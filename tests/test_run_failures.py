"""A run that dies part-way: what search serves is still called stale and pending,
the failure and its cause show in `ragline status` (text and JSON), and the
change sensor retries the failed run with backoff until one succeeds."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from dagster import AssetKey, DagsterInstance, instance_for_test

from rag_assets.definitions import defs
from rag_assets.jobs import INDEX_JOB_NAME
from rag_serving.config import parse_config_file
from rag_serving.search import SearchEngine
from rag_serving.status import index_status
from ragline.cli import cli
from tests.conftest import build_index, write_config

DEAD_OLLAMA = "http://127.0.0.1:9"  # nothing listens on the discard port here
DEAD_EMBEDDER = f'\n[embedder]\nprovider = "ollama"\nmodel = "m"\nhost = "{DEAD_OLLAMA}"\n'


def journal_with_dead_embedder(tmp_path: Path, sample_vault: Path) -> Path:
    """A config of the sample journal whose embedder (Ollama) nothing serves: its runs
    fail in the embeddings step."""
    vault = tmp_path / "journal"
    shutil.copytree(sample_vault / "journal", vault)
    config_path = write_config(
        tmp_path, [{"name": "journal", "kind": "markdown", "path": str(vault)}]
    )
    config_path.write_text(config_path.read_text() + DEAD_EMBEDDER)
    return config_path


def bump(path: Path) -> None:
    later = time.time() + 10
    os.utime(path, (later, later))


def run_job(
    instance: DagsterInstance, source: str, assets: list[str] | None = None
) -> tuple[bool, str]:
    """One real in-process run of ``index_source`` for ``source`` (optionally only
    some of its assets: a run that stops there, as one killed after them would)."""
    job = defs.resolve_job_def(INDEX_JOB_NAME)
    result = job.execute_in_process(
        partition_key=source,
        instance=instance,
        asset_selection=[AssetKey(a) for a in assets] if assets else None,
        raise_on_error=False,
    )
    return result.success, result.run_id


@pytest.fixture()
def indexed_vault(
    tmp_path: Path, sample_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    vault = tmp_path / "vault"
    shutil.copytree(sample_vault / "notes", vault, ignore=shutil.ignore_patterns("drafts"))
    config_path = write_config(
        tmp_path, [{"name": "notes", "kind": "markdown", "path": str(vault)}]
    )
    build_index(config_path)
    monkeypatch.setenv("RAGLINE_CONFIG", str(config_path))
    return vault, config_path


def test_a_run_stopped_after_the_scan_leaves_staleness_visible(
    indexed_vault: tuple[Path, Path],
) -> None:
    vault, config_path = indexed_vault
    config = parse_config_file(config_path)
    note = vault / "Sourdough starter.md"
    note.write_text(note.read_text() + "\nRye flour makes it livelier.\n")
    bump(note)
    (vault / "finance" / "Budget.md").unlink()
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["notes"])
        ok, _ = run_job(instance, "notes", ["raw_files"])
        assert ok
        # The scan recorded the new stat and dropped the deleted file, but search still
        # serves the old chunks: that must read as pending and stale, not as current.
        pending = index_status(config).sources[0].pending
        assert pending is not None
        assert (pending.new, pending.changed, pending.deleted) == (0, 1, 1)
        engine = SearchEngine(config)
        [hit] = [h for h in engine.search("sourdough starter feeding", k=5).hits[:1]]
        assert hit.path == "Sourdough starter.md" and hit.stale == "modified"
        budget = [h for h in engine.search("envelope budget", k=5).hits if "Budget" in h.path]
        assert budget and budget[0].stale == "deleted"

        ok, _ = run_job(instance, "notes")
        assert ok
    assert index_status(config).sources[0].pending.total == 0
    hit = SearchEngine(config).search("rye flour livelier", k=1).hits[0]
    assert hit.path == "Sourdough starter.md" and hit.stale is None


def test_status_shows_the_last_failed_run_and_its_cause(tmp_path: Path, sample_vault: Path) -> None:
    config_path = journal_with_dead_embedder(tmp_path, sample_vault)
    runner = CliRunner()
    indexed = runner.invoke(cli, ["--config", str(config_path), "index"])
    assert indexed.exit_code != 0
    assert "✗ journal: Ollama server not reachable at http://127.0.0.1:9" in " ".join(
        indexed.output.split()
    )

    report = json.loads(
        runner.invoke(cli, ["--config", str(config_path), "status", "--json"]).output
    )
    [journal] = report["sources"]
    failure = journal["last_failure"]
    assert failure is not None and failure["step"] in ("chunks", "embeddings")  # needs the model
    assert "127.0.0.1:9" in failure["message"] and "\n" not in failure["message"]
    assert journal["last_indexed_at"] is None

    shown = runner.invoke(cli, ["--config", str(config_path), "status"])
    assert shown.exit_code == 0
    assert "FAILED" in shown.output
    assert "failed journal: the last run" in " ".join(shown.output.split())
    assert "127.0.0.1:9" in shown.output

    # MCP `status` carries the same failure (for a remote caller without server paths).
    from rag_serving.mcp.auth import LOCAL_ACCESS, Access
    from rag_serving.mcp.service import RaglineService

    config = parse_config_file(config_path)
    [local] = RaglineService(config).status(LOCAL_ACCESS).sources
    assert local.last_failure is not None and local.last_failure.message == failure["message"]
    remote = Access(user="phone", sources=frozenset({"journal"}))
    [seen] = RaglineService(config).status(remote).sources
    assert seen.last_failure is not None and seen.last_failure.run_id == failure["run_id"]

    # Back to the bundled model: the next completed run supersedes the failure.
    config_path.write_text(config_path.read_text().replace(DEAD_EMBEDDER, ""))
    assert runner.invoke(cli, ["--config", str(config_path), "index"]).exit_code == 0
    again = json.loads(
        runner.invoke(cli, ["--config", str(config_path), "status", "--json"]).output
    )
    assert again["sources"][0]["last_failure"] is None


def test_status_table_fits_80_columns_and_escapes_control_characters(
    tmp_path: Path, sample_vault: Path
) -> None:
    vault = tmp_path / "v"
    shutil.copytree(sample_vault / "journal", vault)
    (vault / "evil\x1b[31mred\x07.md").write_bytes(b"\xff\xfe not text \x00\x01")
    (vault / "warn.md").write_text("---\ntitle: [unclosed\n---\n# Body\n\nText.\n")
    name = "a-very-long-source-name-that-goes-on-and-on"
    config_path = write_config(tmp_path, [{"name": name, "kind": "markdown", "path": str(vault)}])
    build_index(config_path)
    shown = CliRunner().invoke(cli, ["--config", str(config_path), "status"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "\x1b" not in shown.output and "\x07" not in shown.output
    assert "evil\\x1b[31mred\\x07.md" in shown.output
    header = next(line for line in lines if line.startswith("source"))
    assert "warns" in header and "errors" in header and "skipped" in header


def test_the_change_sensor_retries_a_failed_run_with_backoff(
    tmp_path: Path, sample_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster import build_sensor_context

    from rag_assets.resources import RaglineConfigResource
    from rag_assets.sensors import source_changes

    config_path = journal_with_dead_embedder(tmp_path, sample_vault)
    good = config_path.read_text().replace(DEAD_EMBEDDER, "")
    monkeypatch.setenv("RAGLINE_CONFIG", str(config_path))
    sensor = source_changes.build_source_changes_sensor(30)

    def tick(instance: DagsterInstance, cursor: str | None):
        context = build_sensor_context(
            instance=instance,
            cursor=cursor,
            resources={"settings": RaglineConfigResource(config_path=str(config_path))},
        )
        return sensor(context)

    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["journal"])
        first = tick(instance, None)
        [request] = first.run_requests
        ok, _ = run_job(instance, "journal")
        assert not ok
        # Same files, failed run: not again at once, but after the backoff.
        waiting = tick(instance, first.cursor)
        assert not waiting.run_requests
        assert "journal: its last run failed; retrying in" in waiting.skip_reason.skip_message
        monkeypatch.setattr(source_changes, "RETRY_BASE_S", 0)
        retry = tick(instance, waiting.cursor)
        [again] = retry.run_requests
        assert again.partition_key == "journal" and again.run_key == f"{request.run_key}:retry1"
        assert json.loads(retry.cursor)["journal:retries"] == "1"
        assert not run_job(instance, "journal")[0]
        second = tick(instance, retry.cursor)
        assert [r.run_key for r in second.run_requests] == [f"{request.run_key}:retry2"]
        monkeypatch.setattr(source_changes, "RETRY_BASE_S", 60)
        # retry2 was asked for; the wait before a third grows to 4 minutes
        assert "retrying in 4 min" in tick(instance, second.cursor).skip_reason.skip_message

        # The cause is fixed (the embedder is back): a successful run ends the retries.
        config_path.write_text(good)
        ok, _ = run_job(instance, "journal")
        assert ok
        settled = tick(instance, second.cursor)
        # the embedder settings changed, so one ordinary run is due; no retry key is left
        assert [r.run_key.count(":retry") for r in settled.run_requests] == [0]
        assert "journal:retries" not in json.loads(settled.cursor)


def test_a_failed_run_of_the_ui_asset_job_is_recorded_by_the_sensor(
    tmp_path: Path, sample_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Materialize in the UI runs Dagster's implicit asset job, which has no hooks: the
    run_failures sensor records its cause instead."""
    from dagster import build_run_status_sensor_context

    from rag_assets.resources import RaglineConfigResource
    from rag_assets.run_failures import run_failures

    config_path = journal_with_dead_embedder(tmp_path, sample_vault)
    monkeypatch.setenv("RAGLINE_CONFIG", str(config_path))
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["journal"])
        asset_job = defs.resolve_implicit_global_asset_job_def()
        result = asset_job.execute_in_process(
            partition_key="journal", instance=instance, raise_on_error=False
        )
        assert not result.success and result.dagster_run.job_name == "__ASSET_JOB"
        config = parse_config_file(config_path)
        assert index_status(config).sources[0].last_failure is None  # no hook on this job
        context = build_run_status_sensor_context(
            sensor_name="run_failures",
            dagster_event=result.get_run_failure_event(),
            dagster_instance=instance,
            dagster_run=result.dagster_run,
            resources={"settings": RaglineConfigResource(config_path=str(config_path))},
        ).for_run_failure()
        run_failures(context)
    failure = index_status(config).sources[0].last_failure
    assert failure is not None and failure.run_id == result.run_id
    assert failure.step in ("chunks", "embeddings") and "127.0.0.1:9" in failure.message
    # the same one line as the hook records, not the serialised "module.Class: " form
    assert failure.message.startswith("Ollama server not reachable at http://127.0.0.1:9")
