"""One indexing run writes at a time, from its first step to its last.

``dagster.yaml`` sets ``concurrency: pools: granularity: run``: the run queue
starts a run that uses the ``ragline_writer`` pool only when no other such run is in
progress, so a run's short last step (``fulltext_index``) never waits behind another
source's long ``embeddings`` step. Runs that do not pass the queue (``ragline
index`` executes its runs in its own process) take their turn here instead: a run
writes only when it is the earliest-started writer run still going. The queue
never starts a run while one is going, so a queued run almost never waits here.
"""

from __future__ import annotations

import time

from dagster import DagsterInstance, DagsterRunStatus, RunRecord, RunsFilter

from rag_assets.recovery import reap_dead_runs

WRITER_POOL = "ragline_writer"  # every indexing asset and the maintenance op
POLL_S = 1.0
REAP_EVERY_S = 10.0
# Runs of this process that have had their turn: every run started before them has
# finished, so their later steps need not ask the run storage again.
_HOLDING_TURN: set[str] = set()


def ensure_writer_pool(instance: DagsterInstance, pool: str) -> None:
    """Record the pool's limit in the instance. The run queue limits only pools it
    finds recorded; under run granularity no step ever records one, so without this
    the first runs queued on a fresh instance would all start at once."""
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits and pool not in storage.get_concurrency_keys():
        storage.initialize_concurrency_limit_to_default(pool)


def run_granularity(instance: DagsterInstance) -> bool:
    """Whether the instance holds pools per run (an instance created by an earlier
    ragline holds them per step: there, runs take turns per step, as before)."""
    granularity = instance.get_concurrency_config().pool_config.pool_granularity
    return getattr(granularity, "value", None) == "run"


def _order(record: RunRecord) -> tuple[float, str]:
    started = record.start_time
    return (started if started is not None else record.create_timestamp.timestamp(),
            record.dagster_run.run_id)  # fmt: skip


def writers_ahead(instance: DagsterInstance, run_id: str, pool: str) -> list[RunRecord]:
    """Writer runs still going that started before ``run_id``."""
    records = instance.get_run_records(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED]))
    mine = next((r for r in records if r.dagster_run.run_id == run_id), None)
    if mine is None:
        return []
    return [
        r
        for r in records
        if r.dagster_run.run_id != run_id
        and r.dagster_run.run_op_concurrency is not None
        and pool in (r.dagster_run.run_op_concurrency.all_pools or ())
        and _order(r) < _order(mine)
    ]


def wait_for_writer_turn(instance: DagsterInstance, run_id: str, pool: str, log) -> None:
    """Return once no writer run that started earlier is still going."""
    if run_id in _HOLDING_TURN or not run_granularity(instance):
        return
    ensure_writer_pool(instance, pool)
    announced: set[str] = set()
    last_reap = time.monotonic()
    while ahead := writers_ahead(instance, run_id, pool):
        for record in ahead:
            if record.dagster_run.run_id not in announced:
                announced.add(record.dagster_run.run_id)
                source = record.dagster_run.tags.get("dagster/partition", "maintenance")
                log.info(
                    f"waiting for run {record.dagster_run.run_id[:8]} ({source}) to finish: "
                    "one run writes to the index at a time"
                )
        if time.monotonic() - last_reap > REAP_EVERY_S:
            reap_dead_runs(instance)
            last_reap = time.monotonic()
        time.sleep(POLL_S)
    _HOLDING_TURN.add(run_id)
