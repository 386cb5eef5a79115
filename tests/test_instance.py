"""The project's Dagster instance: the dagster.yaml an earlier ragline installed is
brought up to date (one the user wrote is kept), and processes that open a new
instance at the same moment all succeed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    assert "granularity: run" in instance_settings()

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
