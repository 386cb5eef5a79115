"""The Dagster code location: assets, partitions, job, resources, instance settings."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml
from dagster import DynamicPartitionsDefinition, instance_for_test, materialize

from rag_assets.definitions import defs
from rag_assets.instance import instance_settings
from rag_assets.jobs import INDEX_JOB_NAME
from rag_assets.resources import default_resources
from tests.conftest import write_config

REPO = Path(__file__).resolve().parents[1]
CHAIN = ["raw_files", "parsed_documents", "chunks", "embeddings", "fulltext_index"]


def test_definitions_have_the_partitioned_chain() -> None:
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == set(CHAIN)
    for upstream, downstream in itertools.pairwise(CHAIN):
        parents = {k.to_user_string() for k in graph.get(_key(downstream)).parent_keys}
        assert parents == {upstream}
    for name in CHAIN:
        partitions = graph.get(_key(name)).partitions_def
        assert isinstance(partitions, DynamicPartitionsDefinition)
        assert partitions.name == "sources"
        # no pool: runs of different sources proceed together (commits take turns
        # under the index's commit lock); the run queue keeps one run per source
        assert not graph.get(_key(name)).pools


def test_index_job_runs_in_process() -> None:
    job = defs.resolve_job_def(INDEX_JOB_NAME)
    assert job.executor_def.name == "in_process"
    # The implicit asset job the UI's "Materialize" button launches, too.
    assert defs.resolve_implicit_global_asset_job_def().executor_def.name == "in_process"
    assert job.partitions_def is not None and job.partitions_def.name == "sources"


def test_instance_settings_disable_telemetry_and_allow_one_run_per_source() -> None:
    packaged = yaml.safe_load(instance_settings())
    assert packaged["telemetry"]["enabled"] is False
    runs = packaged["concurrency"]["runs"]
    assert runs["max_concurrent_runs"] == 1  # the laptop default: one run at a time
    assert runs["tag_concurrency_limits"] == [
        {"key": "dagster/partition", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    ]
    assert "pools" not in packaged["concurrency"]
    assert (REPO / "dagster.yaml").read_text() == instance_settings()
    more = yaml.safe_load(instance_settings("postgres", max_concurrent_runs=4))
    assert more["concurrency"]["runs"]["max_concurrent_runs"] == 4
    assert "postgres" in more["storage"]


def test_the_executor_is_configuration() -> None:
    from rag_assets.executors import executor_for
    from rag_serving.config import DagsterConfig

    assert executor_for(DagsterConfig()).name == "in_process"
    assert executor_for(DagsterConfig(executor="multiprocess")).name == "multiprocess"
    celery = DagsterConfig(executor="celery", storage="postgres")
    assert executor_for(celery).name == "celery"
    with pytest.raises(ValueError, match='executor = "celery" needs storage = "postgres"'):
        DagsterConfig(executor="celery")


def test_workspace_points_at_the_code_location() -> None:
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"]["module_name"] == "rag_assets.definitions"


def test_a_partition_materialises_with_counts(tmp_path: Path, sample_vault: Path) -> None:
    config_path = write_config(
        tmp_path, [{"name": "journal", "kind": "markdown", "path": str(sample_vault / "journal")}]
    )
    from rag_assets.assets import INDEXING_ASSETS

    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["journal"])
        result = materialize(
            INDEXING_ASSETS,
            partition_key="journal",
            instance=instance,
            resources=default_resources(str(config_path)),
        )
        assert result.success
        metadata = {
            m.asset_key.to_user_string(): {k: v.value for k, v in m.metadata.items()}
            for m in result.asset_materializations_for_node("raw_files")
            + result.asset_materializations_for_node("embeddings")
        }
        assert metadata["raw_files"]["new"] == 2
        assert metadata["raw_files"]["dagster/row_count"] == 2
        for count in ("changed", "unchanged", "deleted", "failed"):
            assert metadata["raw_files"][count] == 0
        assert metadata["embeddings"]["dagster/row_count"] >= 2
        assert metadata["embeddings"]["embedded"] == metadata["embeddings"]["dagster/row_count"]

        again = materialize(
            INDEXING_ASSETS,
            partition_key="journal",
            instance=instance,
            resources=default_resources(str(config_path)),
        )
        second = {
            k: v.value
            for k, v in again.asset_materializations_for_node("embeddings")[0].metadata.items()
        }
        assert second["embedded"] == 0 and second["new"] == 0
        assert second["unchanged"] == metadata["embeddings"]["dagster/row_count"]


def _key(name: str):
    from dagster import AssetKey

    return AssetKey(name)
