"""Keeps the ``sources`` partitions equal to the configured sources: adds new ones,
and removes a partition that names no configured source and never held data (one
added by hand with "Add a partition" in the UI's launch dialog). A partition whose
source was removed from the config keeps its data until `ragline sources prune`,
deliberately explicit."""

from dagster import (
    AssetKey,
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from rag_assets.partitions import SOURCES_PARTITIONS_NAME, sources_partitions
from rag_assets.resources import RaglineConfigResource

FIRST_ASSET = AssetKey("raw_files")


def build_source_partitions_sensor(interval_s: int):
    """The sensor, ticking every ``interval_s`` seconds."""

    @sensor(
        name="source_partitions",
        minimum_interval_seconds=interval_s,
        default_status=DefaultSensorStatus.RUNNING,
        description="Adds a `sources` partition for every configured source; removes "
        "partitions that name no configured source and never held data.",
    )
    def source_partitions(
        context: SensorEvaluationContext, settings: RaglineConfigResource
    ) -> SensorResult | SkipReason:
        configured = [s.name for s in settings.load().sources]
        existing = set(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
        missing = [name for name in configured if name not in existing]
        unknown = sorted(existing - set(configured))
        indexed = context.instance.get_materialized_partitions(FIRST_ASSET) if unknown else set()
        stray = [name for name in unknown if name not in indexed]
        removed = [name for name in unknown if name in indexed]
        note = (
            f"; no longer configured: {', '.join(removed)} (delete their data with "
            "`ragline sources prune --yes`)"
            if removed
            else ""
        )
        if not missing and not stray:
            return SkipReason(f"the {len(configured)} configured sources are all partitions{note}")
        requests = []
        if missing:
            context.log.info(f"adding partitions {missing}{note}")
            requests.append(sources_partitions.build_add_request(missing))
        if stray:
            context.log.info(
                f"removing partitions {stray}: no configured source has that name and they "
                "hold no data (add a [[sources]] entry to index one)"
            )
            requests.append(sources_partitions.build_delete_request(stray))
        return SensorResult(dynamic_partitions_requests=requests)

    return source_partitions
