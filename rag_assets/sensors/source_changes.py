"""Requests an indexing run for exactly the sources whose items changed.

Each tick asks every configured source's kind for its cheap change signal (for
files: ``stat()`` only; nothing is read or hashed here: a sensor tick must stay far
below Dagster's 60 s limit) and compares it, plus the indexing settings, with the
cursor. A source whose last run queued costly work (OCR) leaves a marker file; its
modification time, also in the cursor, asks once for a deferred pass.
"""

import hashlib
import json

from dagster import (
    DefaultSensorStatus,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from rag_assets.assets.indexing import PASS_TAG
from rag_assets.jobs import index_source_job
from rag_assets.partitions import SOURCES_PARTITIONS_NAME
from rag_assets.recovery import reap_dead_runs
from rag_assets.resources import RaglineConfigResource
from rag_assets.sources import source_kind
from rag_serving.config import RaglineConfig
from rag_serving.errors import RaglineError
from rag_serving.index.layout import IndexLayout

LAUNCHED_BY_TAG = "ragline/launched_by"


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
        if reaped:
            context.log.warning(f"marked runs whose process died as failed: {reaped}")
        config = settings.load()
        previous: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        partitions = set(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
        extra = settings_fingerprint(config)
        layout = IndexLayout(config.data_dir)
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
                signal = source_kind(source).change_signal()
            except RaglineError as exc:
                notes.append(f"{source.name}: {exc}")
                if source.name in previous:
                    cursor[source.name] = previous[source.name]
                continue
            fingerprint = f"{signal}-{extra}"
            cursor[source.name] = fingerprint
            if previous.get(source.name) != fingerprint:
                requests.append(
                    RunRequest(
                        partition_key=source.name,
                        run_key=f"{source.name}:{fingerprint}",
                        tags={LAUNCHED_BY_TAG: "sensor"},
                    )
                )
        new_cursor = json.dumps(cursor, sort_keys=True, separators=(",", ":"))
        if requests:
            return SensorResult(run_requests=requests, cursor=new_cursor)
        reason = f"no changes in {len(cursor)} source(s)"
        if notes:
            reason += "; " + "; ".join(notes)
        return SensorResult(skip_reason=SkipReason(reason), cursor=new_cursor)

    return source_changes
