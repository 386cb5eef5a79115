"""Requests an indexing run for exactly the sources whose items changed.

Each tick asks every configured source's kind for its cheap change signal (for
files: ``stat()`` only; nothing is read or hashed here: a sensor tick must stay far
below Dagster's 60 s limit) and compares it, plus the indexing settings, with the
cursor. A source whose last run queued costly work (OCR) leaves a marker file; its
modification time, also in the cursor, asks once for a deferred pass.

A source that ``ragline watch`` has indexed at the current signal (it records the
signal before each of its runs) is not run again: the sensor is the safety net for
the events a watcher misses.

The cursor moves when a run is requested, so a run that fails would leave its
changes unindexed until the next change. While a source's latest run has failed,
the sensor requests it again, waiting 1, 2, 4 … minutes (at most an hour) after
each failure; a successful run, or a new change, ends the retries.
"""

import hashlib
import json
import time

from dagster import (
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from rag_assets.assets.indexing import LAUNCHED_BY_TAG, PASS_TAG
from rag_assets.jobs import index_source_job
from rag_assets.partitions import SOURCES_PARTITIONS_NAME
from rag_assets.recovery import reap_dead_runs
from rag_assets.resources import RaglineConfigResource
from rag_assets.run_failures import record_run_failure
from rag_assets.sources import source_kind
from rag_serving.config import RaglineConfig
from rag_serving.index.layout import IndexLayout
from rag_sources.errors import RaglineError

PARTITION_TAG = "dagster/partition"
RETRY_BASE_S = 60
RETRY_MAX_S = 3600


def settings_fingerprint(config: RaglineConfig) -> str:
    """What else decides a source's index: the embedder and the chunking settings.
    Changing either makes every source due for a run."""
    text = config.embedder.model_dump_json() + config.chunking.model_dump_json()
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def build_source_changes_sensor(interval_s: int):
    """The sensor, ticking every ``interval_s`` seconds."""

    @sensor(
        name="source_changes",
        job=index_source_job,
        minimum_interval_seconds=interval_s,
        default_status=DefaultSensorStatus.RUNNING,
        description="Runs `index_source` for each source whose files changed (stat only).",
    )
    def source_changes(
        context: SensorEvaluationContext, settings: RaglineConfigResource
    ) -> SensorResult | SkipReason:
        reaped = reap_dead_runs(context.instance)
        config = settings.load()
        if reaped:
            context.log.warning(f"marked runs whose process died as failed: {reaped}")
            record_dead_runs(context.instance, config, reaped)
        previous: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        partitions = set(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
        extra = settings_fingerprint(config)
        layout = IndexLayout(config.data_dir, config.index_uri)
        cursor: dict[str, str] = {}
        requests: list[RunRequest] = []
        notes: list[str] = []
        for source in config.sources:
            if source.name not in partitions:
                notes.append(f"{source.name}: not a partition yet")
                continue
            deferred_key = f"{source.name}:deferred"
            marker = layout.deferred_marker(source.name)
            try:
                stamp = str(marker.stat().st_mtime_ns)
            except OSError:
                stamp = ""
            if stamp:
                cursor[deferred_key] = stamp
                if previous.get(deferred_key) != stamp:
                    requests.append(
                        RunRequest(
                            partition_key=source.name,
                            run_key=f"{deferred_key}:{stamp}",
                            tags={LAUNCHED_BY_TAG: "sensor", PASS_TAG: "deferred"},
                        )
                    )
            try:
                signal = source_kind(source, config.data_dir, config.index_uri).change_signal()
            except RaglineError as exc:
                notes.append(f"{source.name}: {exc}")
                if source.name in previous:
                    cursor[source.name] = previous[source.name]
                continue
            fingerprint = f"{signal}-{extra}"
            cursor[source.name] = fingerprint
            # A source can come back to an earlier state (a note created, then deleted):
            # its run key must be new all the same, or Dagster drops the request.
            sequence_key = f"{source.name}:seq"
            sequence = int(previous.get(sequence_key, "0"))
            if sequence:
                cursor[sequence_key] = str(sequence)
            changed = previous.get(source.name) != fingerprint
            if changed and fingerprint == watched_fingerprint(layout, source.name):
                notes.append(f"{source.name}: indexed by `ragline watch`")
            elif changed:
                cursor[sequence_key] = str(sequence + 1)
                requests.append(
                    RunRequest(
                        partition_key=source.name,
                        run_key=f"{source.name}:{fingerprint}:{sequence + 1}",
                        tags={LAUNCHED_BY_TAG: "sensor"},
                    )
                )
                continue
            retry_key = f"{source.name}:retries"
            retries = int(previous.get(retry_key, "0"))
            due_in = retry_due_in(context.instance, source.name, retries)
            if due_in is None:
                continue  # the latest run did not fail: nothing to retry
            cursor[retry_key] = str(retries)
            if due_in > 0:
                notes.append(
                    f"{source.name}: its last run failed; retrying in {due_in // 60 + 1} min"
                )
                continue
            cursor[retry_key] = str(retries + 1)
            requests.append(
                RunRequest(
                    partition_key=source.name,
                    run_key=f"{source.name}:{fingerprint}:{sequence}:retry{retries + 1}",
                    tags={LAUNCHED_BY_TAG: "sensor-retry"},
                )
            )
        new_cursor = json.dumps(cursor, sort_keys=True, separators=(",", ":"))
        if requests:
            return SensorResult(run_requests=requests, cursor=new_cursor)
        reason = f"no changes in {len(config.sources)} source(s)"
        if notes:
            reason += "; " + "; ".join(notes)
        return SensorResult(skip_reason=SkipReason(reason), cursor=new_cursor)

    return source_changes


def watched_fingerprint(layout: IndexLayout, source: str) -> str | None:
    """The fingerprint ``ragline watch`` last indexed ``source`` at, if any."""
    try:
        data = json.loads(layout.watched_signal(source).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("fingerprint") if isinstance(data, dict) else None


def record_dead_runs(instance: DagsterInstance, config: RaglineConfig, run_ids: list[str]) -> None:
    """Record the reaped runs as their sources' last failures (for `ragline status`)."""
    for run_id in run_ids:
        run = instance.get_run_by_id(run_id)
        source = run.tags.get(PARTITION_TAG) if run else None
        if source:
            record_run_failure(
                config, source, run_id, None,
                "the process running this run died (killed or crashed); it will be retried",
            )  # fmt: skip


def retry_due_in(instance: DagsterInstance, source: str, retries: int) -> int | None:
    """Seconds until the failed latest run of ``source`` should be retried (0: now),
    or None when its latest indexing run did not fail."""
    # Any job: runs launched with Materialize in the UI use Dagster's implicit asset job.
    records = instance.get_run_records(RunsFilter(tags={PARTITION_TAG: source}), limit=1)
    if not records or records[0].dagster_run.status != DagsterRunStatus.FAILURE:
        return None
    record = records[0]
    ended = record.end_time or record.update_timestamp.timestamp()
    wait = min(RETRY_BASE_S * 2**retries, RETRY_MAX_S)
    return max(0, int(ended + wait - time.time()))
