"""The job that indexes one source partition (its steps run on the executor the
code location chose from ``[dagster] executor``), and the maintenance job."""

from dagster import (
    AssetSelection,
    MetadataValue,
    OpExecutionContext,
    define_asset_job,
    in_process_executor,
    job,
    op,
)

from rag_assets.assets import INDEXING_ASSETS
from rag_assets.partitions import sources_partitions
from rag_assets.resources import IndexStoreResource
from rag_assets.run_failures import record_failure

INDEX_JOB_NAME = "index_source"

index_source_job = define_asset_job(
    INDEX_JOB_NAME,
    selection=AssetSelection.assets(*INDEXING_ASSETS),
    partitions_def=sources_partitions,
    hooks={record_failure},  # the cause reaches `ragline status` and MCP `status`
    description="Index one source: scan, parse, chunk, embed and update the full-text index.",
)


@op(description="Compact LanceDB, drop old versions, merge Tantivy segments.")
def maintain_index_op(context: OpExecutionContext, index_store: IndexStoreResource) -> None:
    """Run index maintenance, holding the index's commit lock."""
    from rag_assets.stages.maintenance import maintain_index

    config = index_store.settings.load()
    report = maintain_index(index_store.store(), config.freshness.keep_versions_hours)
    context.log.info(f"maintenance: {report}")
    context.add_output_metadata(
        {
            "tables_optimized": len(report.tables_optimized),
            "generations_dropped": ", ".join(report.generations_dropped) or "none",
            "fulltext_segments": str(report.fulltext_segments),
            "search_indexes": MetadataValue.json(report.search_indexes),
        }
    )


@job(executor_def=in_process_executor, description="Index maintenance (see docs/operations.md).")
def maintenance_job() -> None:
    maintain_index_op()
