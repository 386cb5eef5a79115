"""Runs of one source take turns; runs of different sources proceed together.

Commits to the index are serialised by the index's commit lock
(``rag_serving.index.commit_lock``), so runs of different sources may parse, chunk
and embed at the same time. Two runs of the *same* source must not: each plans its
writes from what the source's rows are. The run queue starts at most one run per
source (``dagster.yaml``: a limit of 1 per value of the ``dagster/partition`` tag);
runs that do not pass the queue (``ragline index`` and ``ragline watch`` execute
their runs themselves) take their turn here: a run goes on only when it is the
earliest-started run of its source still going.
"""

from __future__ import annotations

import time

from dagster import DagsterInstance, DagsterRunStatus, RunRecord, RunsFilter

from rag_assets.recovery import reap_dead_runs

PARTITION_TAG = "dagster/partition"
POLL_S = 1.0
REAP_EVERY_S = 10.0
# Runs of this process that have had their turn: every run of their source started
# before them has finished, so their later steps need not ask the run storage again.
_HOLDING_TURN: set[str] = set()


def _order(record: RunRecord) -> tuple[float, str]:
    started = record.start_time
    return (started if started is not None else record.create_timestamp.timestamp(),
            record.dagster_run.run_id)  # fmt: skip


def runs_ahead(instance: DagsterInstance, run_id: str) -> list[RunRecord]:
    """Runs of the same source (and job) still going that started before ``run_id``."""
    mine = instance.get_run_record_by_id(run_id)
    if mine is None:
        return []
    source = mine.dagster_run.tags.get(PARTITION_TAG)
    if source is None:
        return []
    records = instance.get_run_records(
        filters=RunsFilter(
            statuses=[DagsterRunStatus.STARTED],
            job_name=mine.dagster_run.job_name,
            tags={PARTITION_TAG: source},
        )
    )
    return [r for r in records if r.dagster_run.run_id != run_id and _order(r) < _order(mine)]


def wait_for_source_turn(instance: DagsterInstance, run_id: str, log) -> None:
    """Return once no run of this run's source that started earlier is still going."""
    if run_id in _HOLDING_TURN:
        return
    announced: set[str] = set()
    last_reap = time.monotonic()
    while ahead := runs_ahead(instance, run_id):
        for record in ahead:
            if record.dagster_run.run_id not in announced:
                announced.add(record.dagster_run.run_id)
                source = record.dagster_run.tags.get(PARTITION_TAG, "?")
                log.info(
                    f"waiting for run {record.dagster_run.run_id[:8]} to finish: "
                    f"one run indexes {source} at a time"
                )
        if time.monotonic() - last_reap > REAP_EVERY_S:
            reap_dead_runs(instance)
            last_reap = time.monotonic()
        time.sleep(POLL_S)
    _HOLDING_TURN.add(run_id)
