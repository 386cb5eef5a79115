"""The project's Dagster instance: the dagster.yaml an earlier ragline installed is
brought up to date (one the user wrote is kept), and processes that open a new
instance at the same moment all succeed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_assets.instance import instance_settings, open_instance, prepare_dagster_home

REPO = Path(__file__).resolve().parents[1]
EARLIER_DEFAULT = """\
# Dagster instance settings for ragline (copied into DAGSTER_HOME by `ragline`).
# Storage stays embedded: SQLite files under DAGSTER_HOME (default: <data_dir>/dagster).

telemetry:
  enabled: false

# Writes to the index are serialised: every indexing asset runs in the
# "ragline_writer" pool, and pools allow one step at a time.
concurrency:
  pools:
    default_limit: 1

run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
"""


def test_an_earlier_default_is_updated_and_a_users_file_kept(tmp_path: Path) -> None:
    home = prepare_dagster_home(tmp_path / "a")
    (home / "dagster.yaml").write_text(EARLIER_DEFAULT)
    prepare_dagster_home(tmp_path / "a")
    assert (home / "dagster.yaml").read_text() == instance_settings()
    assert "applyLimitPerUniqueValue: true" in instance_settings()

    mine = EARLIER_DEFAULT.replace("enabled: false", "enabled: true")
    (home / "dagster.yaml").write_text(mine)
    prepare_dagster_home(tmp_path / "a")
    assert (home / "dagster.yaml").read_text() == mine


def test_processes_opening_a_new_instance_at_once_all_succeed(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from rag_assets.instance import open_instance; "
        "i = open_instance(Path(sys.argv[1])); print(len(i.get_runs()))"
    )
    data_dir = tmp_path / "data"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(data_dir)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outcomes = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0, 0], [err for _, err in outcomes]
    assert [out.strip() for out, _ in outcomes] == ["0"] * 4
    assert open_instance(data_dir).get_runs() == []


def test_the_storage_follows_the_config_and_a_users_file_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_assets.instance import STORAGE_URL_ENV
    from rag_serving.config import DagsterConfig

    monkeypatch.setenv("PG_URL_FOR_TEST", "postgres://dagster@db.lan/dagster")
    monkeypatch.delenv(STORAGE_URL_ENV, raising=False)
    postgres = DagsterConfig(storage="postgres", postgres_url_env="PG_URL_FOR_TEST")
    home = prepare_dagster_home(tmp_path / "a", postgres)
    settings = (home / "dagster.yaml").read_text()
    assert settings == instance_settings("postgres")
    assert f"env: {STORAGE_URL_ENV}" in settings and "db.lan" not in settings  # no URL on disk
    assert os.environ[STORAGE_URL_ENV] == "postgresql+psycopg2://dagster@db.lan/dagster"
    prepare_dagster_home(tmp_path / "a")  # a command without the config keeps it
    assert (home / "dagster.yaml").read_text() == instance_settings("postgres")
    prepare_dagster_home(tmp_path / "a", DagsterConfig())
    assert (home / "dagster.yaml").read_text() == instance_settings("sqlite")

    mine = instance_settings("sqlite").replace("enabled: false", "enabled: true")
    (home / "dagster.yaml").write_text(mine)
    prepare_dagster_home(tmp_path / "a", postgres)
    assert (home / "dagster.yaml").read_text() == mine
