"""Running the Dagster indexing job in this process, recorded in the project's
instance so the runs show up in the Dagster UI."""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rag_serving.config import RaglineConfig
from rag_sources.errors import RaglineError

# A failed step's traceback stays in the run's log (the UI shows it); the command
# prints the one-line cause.
QUIET_LOGGERS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass(frozen=True)
class ProblemCounts:
    """A source's problems after a run: those standing now (as `ragline status` lists
    them) and how many of them this run found (it parsed those items)."""

    failed: int = 0
    skipped: int = 0
    pending: int = 0  # indexed, waiting for a deferred pass (OCR)
    found: int = 0  # failed or skipped items this run parsed

    @property
    def total(self) -> int:
        """Items not indexed: failed or skipped."""
        return self.failed + self.skipped

    @property
    def unchanged(self) -> int:
        """Standing problems found by earlier runs (this run did not parse their items)."""
        return max(0, self.total - self.found)

    def as_json(self) -> dict[str, int]:
        return {"failed": self.failed, "skipped": self.skipped, "pending": self.pending,
                "found_by_this_run": self.found, "unchanged": self.unchanged}  # fmt: skip


@dataclass
class SourceRunOutcome:
    source: str
    run_id: str
    success: bool
    seconds: float
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)  # asset → metadata
    error: str | None = None
    deferred_pass: bool = False  # the run that did the work a first pass queued (OCR)

    @property
    def deferred_documents(self) -> int:
        """Documents whose costly work (OCR) is still queued after this run."""
        return int(self.metadata.get("parsed_documents", {}).get("deferred_documents", 0) or 0)

    @property
    def problems(self) -> ProblemCounts | None:
        """The source's problems after this run; None when the run stopped before its
        parse stage (or an older run's metadata lacks the standing counts)."""
        docs = self.metadata.get("parsed_documents")
        if not docs or "failed_standing" not in docs:
            return None
        return ProblemCounts(
            failed=int(docs["failed_standing"]),
            skipped=int(docs["skipped_standing"]),
            pending=int(docs.get("pending_standing", 0)),
            found=int(docs.get("failed", 0)) + int(docs.get("skipped", 0)),
        )

    @property
    def items(self) -> int:
        """The source's items (files, entries, commits…) the scan listed."""
        return int(self.metadata.get("raw_files", {}).get("dagster/row_count", 0) or 0)

    @property
    def indexed(self) -> int:
        """The source's documents indexed after this run."""
        return int(self.metadata.get("parsed_documents", {}).get("dagster/row_count", 0) or 0)

    @property
    def chunks(self) -> int:
        """The source's chunks served after this run."""
        return int(self.metadata.get("embeddings", {}).get("dagster/row_count", 0) or 0)


class InProcessIndexer:
    """Runs the indexing job from this process, recorded in the project's Dagster
    instance; the instance, the job and (through the resources) the embedder stay
    loaded between runs, so a long-lived process pays for them once.

    With ``[dagster] executor = "in_process"`` the steps run here too; otherwise this
    process orchestrates the run and its steps run on Dagster's multiprocess or
    Celery executor (``execute_job`` of the code location's job)."""

    def __init__(self, config: RaglineConfig, launched_by: str = "cli", capture_logs: bool = True):
        if config.config_path is None:
            raise RaglineError("internal error: the config was not loaded from a file")
        os.environ["RAGLINE_CONFIG"] = str(config.config_path)
        from rag_assets.definitions import defs
        from rag_assets.instance import open_instance
        from rag_assets.jobs import INDEX_JOB_NAME
        from rag_assets.recovery import reap_dead_runs

        logging.getLogger("dagster").setLevel(logging.ERROR)
        self.config = config
        self.launched_by = launched_by
        self.instance = open_instance(config.data_dir, capture_logs, config.dagster)
        reap_dead_runs(self.instance)
        self.job = defs.resolve_job_def(INDEX_JOB_NAME)
        self.in_process = config.dagster.executor == "in_process"
        if not self.in_process:
            if config.dagster.executor == "celery":
                config.dagster.broker_url()  # unset or wrong: a ConfigError now, not a hang
            from dagster._core.definitions.reconstruct import ReconstructableRepository

            repository = ReconstructableRepository.for_module("rag_assets.definitions", "defs")
            self.recon_job = repository.get_reconstructable_job(INDEX_JOB_NAME)

    def add_partitions(self, names: list[str]) -> None:
        """Make each named source a partition of the indexing assets."""
        from rag_assets.partitions import SOURCES_PARTITIONS_NAME

        known = set(self.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
        missing = [name for name in names if name not in known]
        if missing:
            self.instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, missing)

    def run(
        self, name: str, tags: dict[str, str] | None = None, deferred: bool = False
    ) -> SourceRunOutcome:
        """One run of the indexing job for source ``name``."""
        started = time.perf_counter()
        tags = {**(tags or {}), "ragline/launched_by": self.launched_by}
        if self.in_process:
            result = self.job.execute_in_process(
                partition_key=name,
                instance=self.instance,
                tags=tags,
                run_config=QUIET_LOGGERS,
                raise_on_error=False,
            )
        else:
            result = self._execute_elsewhere(name, tags)
        return _outcome(name, result, time.perf_counter() - started, deferred)

    def _execute_elsewhere(self, name: str, tags: dict[str, str]) -> Any:
        """Orchestrate the run here, its steps on the configured executor (the run's
        process is recorded: its death ends the run too)."""
        from dagster import execute_job

        from rag_assets.recovery import orchestrator_tags

        return execute_job(
            self.recon_job,
            instance=self.instance,
            run_config=QUIET_LOGGERS,
            tags={**tags, **orchestrator_tags(), "dagster/partition": name},
            raise_on_error=False,
        )

    def maintain(self) -> MaintenanceOutcome:
        """One run of the maintenance job (compaction, old versions, Tantivy merge)."""
        from rag_assets.definitions import defs

        started = time.perf_counter()
        result = defs.resolve_job_def("maintenance_job").execute_in_process(
            instance=self.instance,
            tags={"ragline/launched_by": self.launched_by},
            run_config=QUIET_LOGGERS,
            raise_on_error=False,
        )
        return _maintenance_outcome(result, time.perf_counter() - started)


@dataclass(frozen=True)
class MaintenanceOutcome:
    run_id: str
    success: bool
    seconds: float
    error: str | None = None


def _maintenance_outcome(result: Any, seconds: float) -> MaintenanceOutcome:
    error = None if result.success else _failure(result)
    return MaintenanceOutcome(result.run_id, result.success, seconds, error)


def _failure(result: Any) -> str:
    """What made the run ``result`` fail, in one line."""
    from rag_assets.run_failures import error_summary

    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            failure = getattr(event.event_specific_data, "error", None)
            if failure is not None:
                return error_summary(failure)
    return "the run failed; see the Dagster UI (`ragline ui`) for its logs"


def index_sources(
    config: RaglineConfig,
    names: list[str],
    full: bool,
    on_progress: Callable[[str, str, int, int], None] | None = None,
    on_problem: Callable[[str, str, str, str], None] | None = None,
    on_outcome: Callable[[SourceRunOutcome], None] | None = None,
) -> list[SourceRunOutcome]:
    """Materialise the indexing chain for each named source (all when empty);
    ``on_progress`` hears each stage's progress, ``on_problem`` each problem a run
    finds (source, item, severity, reason), ``on_outcome`` each run as it ends."""
    selected = [config.source(name).name for name in names] or [s.name for s in config.sources]
    if not selected:
        raise RaglineError(
            f"{config.config_path}: no [[sources]] configured; add one (see `ragline init`)"
        )
    from rag_assets import progress

    indexer = InProcessIndexer(config)
    indexer.add_partitions(selected)
    progress.set_reporter(on_progress)
    progress.set_problem_reporter(on_problem)
    outcomes: list[SourceRunOutcome] = []

    def ran(outcome: SourceRunOutcome) -> None:
        outcomes.append(outcome)
        if on_outcome is not None:
            on_outcome(outcome)

    first = {"ragline/full": "true"} if full else {}
    try:
        # Every source's first pass comes first, so its text documents are searchable
        # before any source spends minutes on OCR.
        _each(selected, lambda name: ran(indexer.run(name, first)), config, first, False, ran)
        deferred = [o.source for o in outcomes if o.success and o.deferred_documents]
        later = {"ragline/pass": "deferred"}
        _each(deferred, lambda name: ran(indexer.run(name, later, True)), config, later, True, ran)
    finally:
        progress.set_reporter(None)
        progress.set_problem_reporter(None)
    return outcomes


def _each(
    names: list[str],
    index: Callable[[str], None],
    config: RaglineConfig,
    tags: dict[str, str],
    deferred: bool,
    ran: Callable[[SourceRunOutcome], None],
) -> None:
    """Index each source: here, one after the other, or — ``[dagster]
    max_concurrent_runs`` above 1 — up to that many at once, each run in a process
    of its own (as Dagster's run launcher does: Dagster's logging set-up is not
    thread-safe); their progress and problems come back through a queue."""
    workers = min(config.dagster.max_concurrent_runs, len(names))
    if workers <= 1:
        for name in names:
            index(name)
        return
    from rag_assets import progress

    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    relay = threading.Thread(target=_relay, args=(events, progress), daemon=True)
    relay.start()
    try:
        with ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_start_child,
            initargs=(str(config.config_path), events, workers),
        ) as pool:
            futures = [pool.submit(_child_run, name, tags, deferred) for name in names]
            for future in futures:
                ran(future.result())
    finally:
        events.put(None)
        relay.join(timeout=5)


def _relay(events: Any, progress: Any) -> None:
    """Hand the children's progress and problems to this process's listeners."""
    while (event := events.get()) is not None:
        kind, args = event
        if kind == "progress":
            progress.report(*args)
        else:
            progress.report_problems(*args)


_CHILD_INDEXER: InProcessIndexer | None = None


def _start_child(config_path: str, events: Any, processes: int) -> None:
    """Set up a run process: its share of the cores, the config, the indexer,
    progress sent to the parent."""
    global _CHILD_INDEXER
    from rag_assets import progress
    from rag_assets.executors import share_cores
    from rag_serving.config import load_config

    share_cores(processes)
    config = load_config(config_path)
    _CHILD_INDEXER = InProcessIndexer(config, launched_by="cli")
    progress.set_reporter(lambda *args: events.put(("progress", args)))
    progress.set_problem_reporter(
        lambda source, item, severity, reason: events.put(
            ("problems", (source, [(item, severity, reason)]))
        )
    )


def _child_run(name: str, tags: dict[str, str], deferred: bool) -> SourceRunOutcome:
    assert _CHILD_INDEXER is not None
    return _CHILD_INDEXER.run(name, tags, deferred)


def _outcome(name: str, result: Any, seconds: float, deferred: bool) -> SourceRunOutcome:
    metadata: dict[str, dict[str, Any]] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        values = {}
        for key, value in materialization.metadata.items():
            values[key] = getattr(value, "value", value)
        metadata[materialization.asset_key.to_user_string()] = values
    error = None if result.success else _failure(result)
    return SourceRunOutcome(name, result.run_id, result.success, seconds, metadata, error, deferred)
