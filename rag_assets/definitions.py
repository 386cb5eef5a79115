"""The ragline code location (``workspace.yaml`` and ``dagster dev -m`` point here)."""

from dagster import Definitions

from rag_assets.assets import INDEXING_ASSETS
from rag_assets.executors import executor_for
from rag_assets.jobs import index_source_job, maintenance_job
from rag_assets.resources import default_resources
from rag_assets.run_failures import run_failures
from rag_assets.schedules.maintenance import build_maintenance_schedule
from rag_assets.schedules.reconcile import build_reconcile_schedule
from rag_assets.sensors.source_changes import build_source_changes_sensor
from rag_assets.sensors.source_partitions import build_source_partitions_sensor
from rag_serving.config import RaglineConfig, load_config
from rag_sources.errors import ConfigError


def _loaded() -> RaglineConfig:
    # Intervals, crons and the executor are fixed when the code location loads; a
    # broken or missing config still loads the location (its runs report the error).
    try:
        return load_config()
    except ConfigError:
        return RaglineConfig()


_config = _loaded()
_settings = _config.freshness

defs = Definitions(
    assets=INDEXING_ASSETS,
    jobs=[index_source_job, maintenance_job],
    sensors=[
        build_source_partitions_sensor(_settings.sensor_interval_s),
        build_source_changes_sensor(_settings.sensor_interval_s),
        run_failures,
    ],
    schedules=[
        build_reconcile_schedule(_settings.reconcile_cron, _settings.timezone),
        build_maintenance_schedule(_settings.maintenance_cron, _settings.timezone),
    ],
    resources=default_resources(),
    # Every job, including the implicit one behind "Materialize" in the UI, runs its
    # steps where [dagster] executor says (see executors.py).
    executor=executor_for(_config.dagster),
)
