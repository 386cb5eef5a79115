"""Recovering from indexing runs whose process died (SIGKILL, power loss).

A run killed mid-way never reports its end, so Dagster keeps it STARTED: the run
queue would hold the writer pool for it, and every later run would wait forever.
Each run records the process that executes it in one readable tag
(``ragline/process``: pid, host and the process's start time, which tells a reused
pid apart); ``reap_dead_runs`` marks runs whose process is gone as failed and frees
their slots. The index itself needs no repair step: every stage is idempotent and
the next run converges to the right content.
"""

from __future__ import annotations

import os
import re
import socket
from datetime import UTC, datetime

import psutil
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

PROCESS_TAG = "ragline/process"
# Tags of runs recorded by earlier versions (still read, so their runs can be reaped).
PID_TAG = "ragline/pid"
PID_STARTED_TAG = "ragline/pid_started"
HOST_TAG = "ragline/host"
_PROCESS = re.compile(r"^pid (\d+) on (.+) since (\S+ \S+) UTC$")


def _started(pid: int) -> str:
    """When process ``pid`` started, to the millisecond, in UTC."""
    created = datetime.fromtimestamp(psutil.Process(pid).create_time(), UTC)
    return created.strftime("%Y-%m-%d %H:%M:%S.") + f"{created.microsecond // 1000:03d}"


def process_tags() -> dict[str, str]:
    """The tag identifying the current process (recorded on the run by its first step),
    e.g. ``pid 4242 on laptop since 2025-11-23 13:04:05.123 UTC``."""
    pid = os.getpid()
    return {PROCESS_TAG: f"pid {pid} on {socket.gethostname()} since {_started(pid)} UTC"}


def run_process(tags: dict[str, str]) -> tuple[int, str, str] | None:
    """(pid, host, start time) recorded on a run, or None when it records none."""
    match = _PROCESS.match(tags.get(PROCESS_TAG, ""))
    return (int(match.group(1)), match.group(2), match.group(3)) if match else None


def _alive(pid: int, started: str) -> bool:
    try:
        return _started(pid) == started
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return False


def _alive_legacy(tags: dict[str, str], host: str) -> bool | None:
    """Whether the process recorded by an earlier version's tags lives (None: no tags)."""
    pid, started = tags.get(PID_TAG), tags.get(PID_STARTED_TAG)
    if not pid or not started or tags.get(HOST_TAG) != host:
        return None
    try:
        return f"{psutil.Process(int(pid)).create_time():.3f}" == started
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
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
        tags = dict(run.tags)
        process = run_process(tags)
        if process is not None:
            if process[1] != host or _alive(process[0], process[2]):
                continue
        elif _alive_legacy(tags, host) is not False:
            continue
        instance.report_run_failed(
            run, "the process running this run died (killed?); the next run repairs the index"
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped
