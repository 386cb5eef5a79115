"""The job that indexes one source partition, in-process."""

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
from rag_assets.assets.indexing import WRITER_POOL
from rag_assets.partitions import sources_partitions
from rag_assets.resources import RaglineConfigResource
from rag_assets.run_failures import record_failure

INDEX_JOB_NAME = "index_source"

index_source_job = define_asset_job(
    INDEX_JOB_NAME,
    selection=AssetSelection.assets(*INDEXING_ASSETS),
    partitions_def=sources_partitions,
    executor_def=in_process_executor,
    hooks={record_failure},  # the cause reaches `ragline status` and MCP `status`
    description="Index one source: scan, parse, chunk, embed and update the full-text index.",
)


@op(pool=WRITER_POOL, description="Compact LanceDB, drop old versions, merge Tantivy segments.")
def maintain_index_op(context: OpExecutionContext, settings: RaglineConfigResource) -> None:
    """Run index maintenance in the writer pool."""
    from rag_assets.stages.maintenance import maintain_index
    from rag_assets.writer_turn import wait_for_writer_turn
    from rag_serving.index.store import IndexStore

    wait_for_writer_turn(context.instance, context.run_id, WRITER_POOL, context.log)
    config = settings.load()
    report = maintain_index(IndexStore(config.data_dir), config.freshness.keep_versions_hours)
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
