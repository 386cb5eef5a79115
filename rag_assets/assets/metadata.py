"""Turning a stage's result into Dagster materialization metadata."""

from __future__ import annotations

from collections.abc import Sequence

from dagster import AssetCheckResult, MaterializeResult, MetadataValue

from rag_assets.stages.result import StageResult

MAX_LISTED_PROBLEMS = 50


def materialize_result(
    result: StageResult, check_results: Sequence[AssetCheckResult] = ()
) -> MaterializeResult:
    """Counts (new, changed, unchanged, deleted, failed, skipped), the row count and a
    table of the files that failed or were skipped."""
    metadata: dict[str, object] = {**result.counts(), "dagster/row_count": result.row_count}
    metadata.update(result.extra)
    if result.problems:
        lines = ["| file | severity | problem |", "|---|---|---|"]
        for problem in result.problems[:MAX_LISTED_PROBLEMS]:
            message = problem.message.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| `{problem.path}` | {problem.severity} | {message} |")
        if len(result.problems) > MAX_LISTED_PROBLEMS:
            lines.append(f"| … | | {len(result.problems) - MAX_LISTED_PROBLEMS} more |")
        metadata["problems"] = MetadataValue.md("\n".join(lines))
    return MaterializeResult(metadata=metadata, check_results=list(check_results))
