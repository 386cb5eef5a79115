"""The job that indexes one source partition, in-process."""

from dagster import AssetSelection, define_asset_job, in_process_executor

from rag_assets.assets import INDEXING_ASSETS
from rag_assets.partitions import sources_partitions

INDEX_JOB_NAME = "index_source"

index_source_job = define_asset_job(
    INDEX_JOB_NAME,
    selection=AssetSelection.assets(*INDEXING_ASSETS),
    partitions_def=sources_partitions,
    executor_def=in_process_executor,
    description="Index one source: scan, parse, chunk, embed and update the full-text index.",
)
