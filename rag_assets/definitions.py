"""The ragline code location (``workspace.yaml`` and ``dagster dev -m`` point here)."""

from dagster import Definitions

from rag_assets.assets import INDEXING_ASSETS
from rag_assets.jobs import index_source_job
from rag_assets.resources import default_resources

defs = Definitions(
    assets=INDEXING_ASSETS,
    jobs=[index_source_job],
    resources=default_resources(),
)
