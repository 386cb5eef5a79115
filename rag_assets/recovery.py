"""Recovering from indexing runs whose process died (SIGKILL, power loss).

A run killed mid-way never reports its end, so Dagster keeps it STARTED and keeps
its writer-pool slot claimed: every later run would wait for that slot forever.
Each run records the process that executes it (``ragline/pid`` and its start
time); ``reap_dead_runs`` marks runs whose process is gone as failed and frees
their slots. The index itself needs no repair step: every stage is idempotent and
the next run converges to the right content.
"""

from __future__ import annotations

import os
import socket

import psutil
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

PID_TAG = "ragline/pid"
PID_STARTED_TAG = "ragline/pid_started"
HOST_TAG = "ragline/host"


def process_tags() -> dict[str, str]:
    """Tags identifying the current process (recorded on the run by its first step)."""
    return {
        PID_TAG: str(os.getpid()),
        PID_STARTED_TAG: f"{psutil.Process().create_time():.3f}",
        HOST_TAG: socket.gethostname(),
    }


def _alive(pid: int, started: str) -> bool:
    try:
        return f"{psutil.Process(pid).create_time():.3f}" == started
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def reap_dead_runs(instance: DagsterInstance) -> list[str]:
    """Fail the in-flight runs of this host whose process no longer exists; returns
    their run ids."""
    host = socket.gethostname()
    reaped = []
    in_flight = instance.get_runs(
        filters=RunsFilter(statuses=[DagsterRunStatus.STARTED, DagsterRunStatus.STARTING])
    )
    for run in in_flight:
        pid, started = run.tags.get(PID_TAG), run.tags.get(PID_STARTED_TAG)
        if not pid or not started or run.tags.get(HOST_TAG) != host:
            continue
        if _alive(int(pid), started):
            continue
        instance.report_run_failed(
            run, "the process running this run died (killed?); the next run repairs the index"
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped
