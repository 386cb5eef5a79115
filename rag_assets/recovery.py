"""Recovering from indexing runs whose process died (SIGKILL, power loss).

A run killed mid-way never reports its end, so Dagster keeps it STARTED: the run
queue would hold the writer pool for it, and every later run would wait forever.
Each step records the process that executes it in one readable tag
(``ragline/step/<step>``: pid, host and the process's start time, which tells a
reused pid apart; ``ragline/process`` names the latest); ``reap_dead_runs`` marks
runs with a step whose process is gone as failed and frees their slots. The index itself needs no repair step: every stage is idempotent and
the next run converges to the right content.

A pid means nothing on another host. When the instance is shared (Postgres), each
run's process also records a heartbeat (``ragline/heartbeat``, UTC, every
``HEARTBEAT_S``); a run of another host unheard of for ``STALE_AFTER_S`` is reaped
by whichever host looks first, so a host that went down never holds the writer pool.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import psutil
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

PROCESS_TAG = "ragline/process"
# The process orchestrating a run whose steps run in other processes (`ragline index`
# with the multiprocess or Celery executor): its death ends the run too.
ORCHESTRATOR_TAG = "ragline/orchestrator"
# Tags of runs recorded by earlier versions (still read, so their runs can be reaped).
PID_TAG = "ragline/pid"
PID_STARTED_TAG = "ragline/pid_started"
HOST_TAG = "ragline/host"
_PROCESS = re.compile(r"^pid (\d+) on (.+) since (\S+ \S+) UTC$")
HEARTBEAT_TAG = "ragline/heartbeat"
# One per step: the process running it, then "done: <process>" when it ended (steps
# of one run may run at once in several processes: Celery workers, multiprocess).
STEP_TAG_PREFIX = "ragline/step/"
# One per step running on a shared instance: its process's last heartbeat.
BEAT_TAG_PREFIX = "ragline/beat/"
_DONE = "done: "
HEARTBEAT_S = 30.0
# Ten missed heartbeats: longer than any pause of a busy host (and than clock skew).
STALE_AFTER_S = 300.0
IN_FLIGHT = (DagsterRunStatus.STARTED, DagsterRunStatus.STARTING)
_log = logging.getLogger(__name__)


def _started(pid: int) -> str:
    """When process ``pid`` started, to the millisecond, in UTC."""
    created = datetime.fromtimestamp(psutil.Process(pid).create_time(), UTC)
    return created.strftime("%Y-%m-%d %H:%M:%S.") + f"{created.microsecond // 1000:03d}"


def process_descriptor(pid: int) -> str:
    """How a run's tags name a live process of this host, e.g.
    ``pid 4242 on laptop since 2025-11-23 13:04:05.123 UTC``."""
    return f"pid {pid} on {socket.gethostname()} since {_started(pid)} UTC"


def process_tags() -> dict[str, str]:
    """The tag identifying the current process (recorded on the run by its steps)."""
    return {PROCESS_TAG: process_descriptor(os.getpid())}


def orchestrator_tags() -> dict[str, str]:
    """The tag naming the process that orchestrates a run whose steps run elsewhere."""
    return {ORCHESTRATOR_TAG: process_tags()[PROCESS_TAG]}


def run_process(tags: dict[str, str], tag: str = PROCESS_TAG) -> tuple[int, str, str] | None:
    """(pid, host, start time) recorded on a run, or None when it records none."""
    match = _PROCESS.match(tags.get(tag, ""))
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


def is_shared(instance: DagsterInstance) -> bool:
    """Whether hosts other than this one may use the instance (its runs are not in
    SQLite files of this host)."""
    return "Sqlite" not in type(instance.run_storage).__name__


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Heartbeat:
    """Records ``ragline/heartbeat`` on a run, and ``ragline/beat/<step>`` for each step
    this process runs, every ``interval`` seconds from a daemon thread while the run
    is going (started at its first step here; ends with the run, or once this process
    neither runs a step of it nor is the run's latest process)."""

    def __init__(self, instance: DagsterInstance, run_id: str, interval: float = HEARTBEAT_S):
        self.instance, self.run_id, self.interval = instance, run_id, interval
        self.process = process_tags()[PROCESS_TAG]
        self.steps: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="ragline-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self.instance.add_run_tags(self.run_id, self._tags())
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _tags(self) -> dict[str, str]:
        now = _now()
        return {HEARTBEAT_TAG: now, **{BEAT_TAG_PREFIX + step: now for step in set(self.steps)}}

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    run = self.instance.get_run_by_id(self.run_id)
                    if run is None or run.status not in IN_FLIGHT:
                        return
                    if not self.steps and run.tags.get(PROCESS_TAG) != self.process:
                        return  # other processes (workers) run its steps now
                    self.instance.add_run_tags(self.run_id, self._tags())
                except Exception:  # the database away for a moment: try at the next beat
                    continue
        finally:
            if _BEATING.get(self.run_id) is self:
                _BEATING.pop(self.run_id, None)


_BEATING: dict[str, Heartbeat] = {}


def start_heartbeat(instance: DagsterInstance, run_id: str) -> Heartbeat | None:
    """Start the run's heartbeat in this process (once per run; shared instances only)."""
    if not is_shared(instance):
        return None
    if run_id not in _BEATING:
        _BEATING[run_id] = Heartbeat(instance, run_id).start()
    return _BEATING[run_id]


@contextmanager
def claimed_step(instance: DagsterInstance, run_id: str, step_key: str) -> Iterator[None]:
    """Record this process as running ``step_key`` of the run (and as the run's latest
    process) until the step ends: on Dagster's multiprocess or Celery executor steps
    run in other processes, several at once, and the ones to watch are those working.
    A process killed mid-step leaves its claim behind, which is how it is found."""
    mine = process_tags()[PROCESS_TAG]
    instance.add_run_tags(run_id, {PROCESS_TAG: mine, STEP_TAG_PREFIX + step_key: mine})
    beating = start_heartbeat(instance, run_id)
    if beating is not None:
        beating.steps.add(step_key)
        instance.add_run_tags(run_id, {BEAT_TAG_PREFIX + step_key: _now()})

    def release() -> None:
        if beating is not None:
            beating.steps.discard(step_key)
        instance.add_run_tags(run_id, {STEP_TAG_PREFIX + step_key: _DONE + mine})

    try:
        yield
    finally:
        if _TASK_ENDINGS is not None:
            _TASK_ENDINGS.append(release)
        else:
            release()


# In a Celery worker, the claims of the task running now: released once its result is
# in the backend. A step's code ends (its events written, its failure hook run) before
# the worker stores the task's answer; a worker killed in between, with the claim
# already released, would leave the orchestrator waiting for an answer from a process
# nobody watches any more.
_TASK_ENDINGS: list[Callable[[], None]] | None = None
_HOLDING = False


def hold_claims_until_task_ends() -> None:
    """In a Celery worker: keep each step's claim until the worker has stored its task's
    result (Celery's ``task_postrun`` comes after it), so that a worker killed at any
    point before the orchestrator can see the answer is found dead by ``StepWatch``."""
    global _HOLDING
    if _HOLDING:
        return
    _HOLDING = True
    from celery.signals import task_postrun, task_prerun

    def started(**_: object) -> None:
        global _TASK_ENDINGS
        _TASK_ENDINGS = []

    def ended(**_: object) -> None:
        global _TASK_ENDINGS
        endings, _TASK_ENDINGS = _TASK_ENDINGS or [], None
        for release in endings:
            try:
                release()
            except Exception as exc:  # the database away: the run's end says the rest
                _log.warning(f"recording a step's end failed: {exc}")

    task_prerun.connect(started, weak=False)
    task_postrun.connect(ended, weak=False)


def _silent_since(tags: dict[str, str], now: datetime) -> float | None:
    """Seconds since the run's last heartbeat (None: it records none)."""
    beat = tags.get(HEARTBEAT_TAG)
    if not beat:
        return None
    try:
        then = datetime.strptime(beat, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return (now - then).total_seconds()


class StepWatch:
    """Watches a run this process orchestrates while its steps run elsewhere (Celery
    workers): every ``interval`` seconds it looks at the process recorded as running
    the run's step; once that one is dead (``dead_reason``), it calls ``on_dead``
    with the reason (which fails the step's task, so the run ends as failed)."""

    def __init__(
        self,
        instance: DagsterInstance,
        run_id: str,
        on_dead: Callable[[str], None],
        interval: float = 5.0,
    ):
        self.instance, self.run_id, self.on_dead, self.interval = (
            instance, run_id, on_dead, interval
        )  # fmt: skip
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ragline-step-watch", daemon=True)

    def __enter__(self) -> StepWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(self.interval):
            # The watch must outlive any error: a watch that stopped would let a run
            # whose worker died wait forever.
            try:
                run = self.instance.get_run_by_id(self.run_id)
                if run is None or run.status not in IN_FLIGHT:
                    continue
                reason = dead_reason(dict(run.tags), socket.gethostname(), datetime.now(UTC))
                if reason is not None:
                    self.on_dead(reason)
            except Exception as exc:  # the database or the broker away for a moment
                _log.warning(f"run {self.run_id}: watching its steps failed, trying again: {exc}")


def dead_reason(tags: dict[str, str], host: str, now: datetime) -> str | None:
    """Why a process recorded as running one of the run's steps is dead — on this
    host, checked by pid; on another host, by a heartbeat silent for ``STALE_AFTER_S``
    — or None while they live (or the run records none)."""
    steps = {k[len(STEP_TAG_PREFIX) :]: v for k, v in tags.items() if k.startswith(STEP_TAG_PREFIX)}
    running = {step: process for step, process in steps.items() if not process.startswith(_DONE)}
    for step, process in sorted(running.items()):
        beat = tags.get(BEAT_TAG_PREFIX + step) or tags.get(HEARTBEAT_TAG)
        reason = _process_dead(run_process({PROCESS_TAG: process}), beat, host, now, step)
        if reason is not None:
            return reason
    if running:
        return None
    if len({process.removeprefix(_DONE) for process in steps.values()}) > 1:
        return None  # its steps run in processes of their own, and none is running now
    # No step running: the process of the run's last step (all its steps, when it
    # executes them itself) must still live; runs of earlier versions record only it.
    process = run_process(tags)
    if process is not None:
        return _process_dead(process, tags.get(HEARTBEAT_TAG), host, now, None)
    if _alive_legacy(tags, host) is not False:
        return None
    return "the process running this run died (killed?); the next run repairs the index"


def _process_dead(
    process: tuple[int, str, str] | None,
    beat: str | None,
    host: str,
    now: datetime,
    step: str | None,
) -> str | None:
    if process is None:
        return None
    what = f"step {step}" if step else "this run"
    if process[1] != host:
        silent = _silent_since({HEARTBEAT_TAG: beat} if beat else {}, now)
        if silent is None or silent < STALE_AFTER_S:
            return None
        last = (now - timedelta(seconds=silent)).strftime("%Y-%m-%d %H:%M:%S UTC")
        return (
            f"the host {process[1]} running {what} has not been heard from since "
            f"{last} (down?); the next run repairs the index"
        )
    if _alive(process[0], process[2]):
        return None
    return f"the process running {what} died (killed?); the next run repairs the index"


def reap_dead_runs(instance: DagsterInstance) -> list[str]:
    """Fail the in-flight runs whose process no longer exists — on this host, checked
    by pid; on another host sharing the instance, by a heartbeat silent for
    ``STALE_AFTER_S`` — and free their writer slots; returns their run ids."""
    host = socket.gethostname()
    now = datetime.now(UTC)
    reaped = []
    for run in instance.get_runs(filters=RunsFilter(statuses=list(IN_FLIGHT))):
        tags = dict(run.tags)
        orchestrator = run_process(tags, ORCHESTRATOR_TAG)
        if (
            orchestrator is not None
            and orchestrator[1] == host
            and not _alive(orchestrator[0], orchestrator[2])
        ):
            reason: str | None = (
                "the process orchestrating this run died (killed?); the next run repairs the index"
            )
        else:
            reason = dead_reason(tags, host, now)
        if reason is None:
            continue
        instance.report_run_failed(run, reason)
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped
