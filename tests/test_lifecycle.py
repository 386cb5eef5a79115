"""Process lifecycle: one indexing run writes at a time from its first step to its
last, even for runs that bypass the run queue (`ragline index` in its own process);
`ragline ui` started from a script with SIGINT ignored still stops on SIGTERM and
leaves no process behind."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from rag_serving.config import RaglineConfig, parse_config_file
from tests.conftest import write_config
from tests.ui_process import free_port, wait_until_answering

REPO = Path(__file__).resolve().parents[1]
WORDS = [
    "river",
    "mountain",
    "glacier",
    "compost",
    "tomato",
    "kernel",
    "rollout",
    "budget",
    "starter",
    "flour",
    "orbit",
    "lantern",
    "harbor",
    "meadow",
    "copper",
    "violin",
    "paper",
    "garden",
    "signal",
    "thunder",
    "marble",
    "canyon",
]


def write_notes(folder: Path, count: int, words: int, seed: int = 7) -> None:
    """``count`` distinct notes of about ``words`` words each."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        paragraphs = [
            " ".join(rng.choice(WORDS) for _ in range(60)) + "." for _ in range(words // 60)
        ]
        text = f"# Note {i}\n\n" + "\n\n".join(paragraphs) + "\n"
        (folder / f"note {i:04d}.md").write_text(text)


def _ragline(config_path: Path, *args: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("DAGSTER_HOME", None)
    return subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), *args],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs,
    )  # fmt: skip


def _instance(config: RaglineConfig):
    from rag_assets.instance import open_instance

    return open_instance(config.data_dir)


def _materialization_times(instance, run_id: str) -> list[float]:
    return [
        e.timestamp
        for e in instance.all_logs(run_id)
        if e.dagster_event is not None
        and e.dagster_event.event_type_value == "ASSET_MATERIALIZATION"
    ]


def test_two_runs_of_one_source_take_turns(tmp_path: Path) -> None:
    """Two `ragline index notes` at once: runs of different sources proceed together
    (their commits take turns), but two runs of one source must not, each planning
    its writes from what the source's rows are: the run that started second writes
    only after the first has ended, and says whom it waits for."""
    write_notes(tmp_path / "notes", count=60, words=180)
    config_path = write_config(
        tmp_path, [{"name": "notes", "kind": "markdown", "path": str(tmp_path / "notes")}]
    )
    config = parse_config_file(config_path)
    from dagster import RunsFilter

    # Create the instance first: two processes creating one SQLite instance at the same
    # moment race on its schema migration (alembic "more than one head").
    instance = _instance(config)
    processes = [_ragline(config_path, "index", "notes") for _ in range(2)]
    outputs = [p.communicate(timeout=600)[0].decode() for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    first, second = sorted(
        instance.get_run_records(filters=RunsFilter(job_name="index_source")),
        key=lambda r: r.start_time,
    )
    assert second.start_time < first.end_time, (
        "the runs did not overlap: the test proves nothing; give the source more notes"
    )
    first_writes = _materialization_times(instance, first.dagster_run.run_id)
    second_writes = _materialization_times(instance, second.dagster_run.run_id)
    assert len(first_writes) == len(second_writes) == 5
    assert min(second_writes) > max(first_writes)
    waited = [
        e.user_message
        for e in instance.all_logs(second.dagster_run.run_id)
        if "waiting for run" in (e.user_message or "")
    ]
    assert waited and f"run {first.dagster_run.run_id[:8]}" in waited[0]
    assert "one run indexes notes at a time" in waited[0]


def _ignore_sigint() -> None:
    # What `cmd &` in a non-interactive shell (and nohup) does to a background job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_ui_started_with_sigint_ignored_stops_on_sigterm(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", count=1, words=60)
    config_path = write_config(
        tmp_path, [{"name": "notes", "kind": "markdown", "path": str(tmp_path / "notes")}]
    )
    port = free_port()
    family: list[psutil.Process] = []
    process = _ragline(
        config_path, "ui", "--port", str(port), preexec_fn=_ignore_sigint, start_new_session=True
    )
    try:
        wait_until_answering(f"http://127.0.0.1:{port}", process)
        # The webserver, the daemon and the code servers are up.
        deadline = time.time() + 60
        while time.time() < deadline:
            family = psutil.Process(process.pid).children(recursive=True)
            commands = " ".join(" ".join(p.cmdline()) for p in family)
            if "dagster_webserver" in commands and "dagster._daemon" in commands:
                break
            time.sleep(1)
        assert len(family) >= 3, [p.cmdline() for p in family]
        family.append(psutil.Process(process.pid))

        process.send_signal(signal.SIGTERM)
        _, alive = psutil.wait_procs(family, timeout=45)
        assert not alive, [p.cmdline()[:4] for p in alive]
        assert process.wait(timeout=5) is not None
        assert not (tmp_path / "data" / "dagster" / "webserver.json").exists()
    finally:
        for member in family:  # whatever a failure left behind
            if member.is_running():
                member.kill()
        if process.poll() is None:
            process.kill()
            process.wait()
