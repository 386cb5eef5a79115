"""Turning a stage's result into Dagster materialization metadata."""

from __future__ import annotations

from collections.abc import Sequence

from dagster import AssetCheckResult, MaterializeResult, MetadataValue

from rag_assets.checks import problems_table
from rag_assets.stages.result import StageResult


def materialize_result(
    result: StageResult,
    check_results: Sequence[AssetCheckResult] = (),
    extra: dict[str, object] | None = None,
) -> MaterializeResult:
    """Counts (new, changed, unchanged, deleted, failed, skipped), the row count, the
    ``extra`` entries and a table of the items that failed or were skipped (escaped
    Markdown, short enough for the UI to show it without a click)."""
    metadata: dict[str, object] = {**result.counts(), "dagster/row_count": result.row_count}
    metadata.update(result.extra)
    metadata.update(extra or {})
    if result.problems:
        metadata["problems"] = MetadataValue.md(
            problems_table([(p.path, p.severity, p.message) for p in result.problems])
        )
    return MaterializeResult(metadata=metadata, check_results=list(check_results))
