"""Nightly reconcile: a full rebuild run of every configured source, which repairs
any drift a missed event could leave (vectors of unchanged text are reused)."""

from dagster import (
    DefaultScheduleStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    schedule,
)

from rag_assets.assets.indexing import FULL_REBUILD_TAG
from rag_assets.jobs import index_source_job
from rag_assets.partitions import SOURCES_PARTITIONS_NAME
from rag_assets.resources import RaglineConfigResource
from rag_assets.sensors.source_changes import LAUNCHED_BY_TAG


def build_reconcile_schedule(cron: str, timezone: str):
    """The schedule on ``cron`` in ``timezone``."""

    @schedule(
        name="nightly_reconcile",
        job=index_source_job,
        cron_schedule=cron,
        execution_timezone=timezone,
        default_status=DefaultScheduleStatus.RUNNING,
        description="Full scan of every source: re-hash every file and repair any drift.",
    )
    def nightly_reconcile(
        context: ScheduleEvaluationContext, settings: RaglineConfigResource
    ) -> list[RunRequest] | SkipReason:
        partitions = set(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
        sources = [s for s in settings.load().sources if s.name in partitions]
        if not sources:
            return SkipReason("no configured source is a partition yet")
        stamp = context.scheduled_execution_time.isoformat()
        return [
            RunRequest(
                partition_key=source.name,
                run_key=f"reconcile:{source.name}:{stamp}",
                tags={FULL_REBUILD_TAG: "true", LAUNCHED_BY_TAG: "reconcile"},
            )
            for source in sources
        ]

    return nightly_reconcile
