"""Which in-flight runs are dead: each step claims the run for its process while it
runs (``claimed_step``), several at once when steps run in processes of their own,
and a run is dead once a process that claimed a running step is gone — on this host
by pid, on another host by a silent heartbeat. Real processes, a real instance."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from dagster import DagsterInstance
from dagster._core.test_utils import create_run_for_test

from rag_assets.recovery import (
    BEAT_TAG_PREFIX,
    HEARTBEAT_TAG,
    PROCESS_TAG,
    STEP_TAG_PREFIX,
    claimed_step,
    dead_reason,
    hold_claims_until_task_ends,
    process_descriptor,
    process_tags,
)

HOST = socket.gethostname()
NOW = datetime.now(UTC)
PART1, PART2 = "embeddings.embed_part[part1]", "embeddings.embed_part[part2]"


@pytest.fixture
def child() -> Iterator[subprocess.Popen]:
    """A live process of this host other than this one."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def _dead(process: subprocess.Popen) -> str:
    """``process``'s descriptor, taken while it lived, then the process killed."""
    descriptor = process_descriptor(process.pid)
    process.kill()
    process.wait()
    return descriptor


def test_a_running_step_whose_process_died_names_the_step(child: subprocess.Popen) -> None:
    me = process_tags()[PROCESS_TAG]
    tags = {STEP_TAG_PREFIX + PART1: me, STEP_TAG_PREFIX + PART2: process_descriptor(child.pid)}
    assert dead_reason({**tags, PROCESS_TAG: me}, HOST, NOW) is None
    tags[STEP_TAG_PREFIX + PART2] = _dead(child)
    reason = dead_reason({**tags, PROCESS_TAG: me}, HOST, NOW)
    assert reason == (
        f"the process running step {PART2} died (killed?); the next run repairs the index"
    )


def test_between_steps_of_processes_of_their_own_the_run_lives() -> None:
    """Multiprocess executor: each step's process ends with its step, and before the
    next step starts no step runs: the run is not dead for that."""
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    second = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    a, b = _dead(first), _dead(second)
    tags = {STEP_TAG_PREFIX + "chunks": f"done: {a}", STEP_TAG_PREFIX + "raw_files": f"done: {b}"}
    assert dead_reason({**tags, PROCESS_TAG: a}, HOST, NOW) is None
    # one process ran every step (in-process): killed between two steps, the run is dead
    alone = {STEP_TAG_PREFIX + "chunks": f"done: {a}", STEP_TAG_PREFIX + "raw_files": f"done: {a}"}
    assert "died" in (dead_reason({**alone, PROCESS_TAG: a}, HOST, NOW) or "")


def test_a_step_on_another_host_is_dead_once_its_own_heartbeat_is_silent() -> None:
    elsewhere = "pid 7 on far-away since 2026-01-01 00:00:00.000 UTC"

    def beat(seconds_ago: int) -> str:
        return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")

    tags = {
        STEP_TAG_PREFIX + PART1: elsewhere,
        BEAT_TAG_PREFIX + PART1: beat(20),
        HEARTBEAT_TAG: beat(10),
    }
    assert dead_reason(tags, HOST, NOW) is None
    # the run's own heartbeat is fresh (another worker beats it); the step's is not
    tags[BEAT_TAG_PREFIX + PART1] = beat(900)
    reason = dead_reason(tags, HOST, NOW) or ""
    assert reason.startswith(f"the host far-away running step {PART1} has not been heard from")


def test_a_claim_lasts_as_long_as_its_step() -> None:
    instance = DagsterInstance.ephemeral()
    run = create_run_for_test(instance, job_name="index_source")
    me = process_tags()[PROCESS_TAG]
    with pytest.raises(RuntimeError), claimed_step(instance, run.run_id, PART1):
        tags = instance.get_run_by_id(run.run_id).tags
        assert tags[STEP_TAG_PREFIX + PART1] == me and tags[PROCESS_TAG] == me
        raise RuntimeError("a failed step ends its claim too")
    assert instance.get_run_by_id(run.run_id).tags[STEP_TAG_PREFIX + PART1] == f"done: {me}"


def test_a_celery_worker_holds_the_claim_until_the_task_result_is_stored() -> None:
    """A worker killed after its step's code ended but before it stored the task's
    answer must still be found dead: the claim ends only after the result is stored."""
    from celery import Celery
    from celery.signals import task_success

    instance = DagsterInstance.ephemeral()
    run = create_run_for_test(instance, job_name="index_source")
    me = process_tags()[PROCESS_TAG]
    app = Celery("claims", broker="memory://", backend="cache+memory://")
    app.conf.update(task_always_eager=True, task_store_eager_result=True)
    hold_claims_until_task_ends()

    @app.task
    def step() -> str:
        with claimed_step(instance, run.run_id, PART1):
            pass
        return "answer"

    seen: list[tuple[str, str]] = []

    def stored(sender: object = None, **_: object) -> None:
        claim = instance.get_run_by_id(run.run_id).tags[STEP_TAG_PREFIX + PART1]
        stored_state = app.backend.get_task_meta(sender.request.id)["status"]
        seen.append((claim, stored_state))

    task_success.connect(stored, weak=False)
    try:
        assert step.delay().get() == "answer"
    finally:
        task_success.disconnect(stored)
    assert seen == [(me, "SUCCESS")]  # the answer stored, the claim still held
    assert instance.get_run_by_id(run.run_id).tags[STEP_TAG_PREFIX + PART1] == f"done: {me}"
