"""Keeps the ``sources`` partitions equal to the configured sources (adds new ones;
removing a source's data is `ragline sources prune`, deliberately explicit)."""

from dagster import (
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from rag_assets.partitions import SOURCES_PARTITIONS_NAME, sources_partitions
from rag_assets.resources import RaglineConfigResource


def build_source_partitions_sensor(interval_s: int):
    """The sensor, ticking every ``interval_s`` seconds."""

    @sensor(
        name="source_partitions",
        minimum_interval_seconds=interval_s,
        default_status=DefaultSensorStatus.RUNNING,
        description="Adds a `sources` partition for every configured source.",
    )
    def source_partitions(
        context: SensorEvaluationContext, settings: RaglineConfigResource
    ) -> SensorResult | SkipReason:
        configured = [s.name for s in settings.load().sources]
        existing = set(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
        missing = [name for name in configured if name not in existing]
        removed = sorted(existing - set(configured))
        note = (
            f"; no longer configured: {', '.join(removed)} (delete their data with "
            "`ragline sources prune --yes`)"
            if removed
            else ""
        )
        if not missing:
            return SkipReason(f"the {len(configured)} configured sources are all partitions{note}")
        context.log.info(f"adding partitions {missing}{note}")
        return SensorResult(
            dynamic_partitions_requests=[sources_partitions.build_add_request(missing)]
        )

    return source_partitions
