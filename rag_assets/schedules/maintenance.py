"""Nightly index maintenance."""

from dagster import DefaultScheduleStatus, ScheduleDefinition

from rag_assets.jobs import maintenance_job


def build_maintenance_schedule(cron: str, timezone: str) -> ScheduleDefinition:
    """The maintenance job on ``cron`` in ``timezone``."""
    return ScheduleDefinition(
        name="nightly_maintenance",
        job=maintenance_job,
        cron_schedule=cron,
        execution_timezone=timezone,
        default_status=DefaultScheduleStatus.RUNNING,
        description="Compact LanceDB and clean old versions, merge Tantivy segments.",
    )
