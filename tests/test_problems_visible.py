"""A source's problems stay visible in Dagster where users look: the items_indexed
check is evaluated per source (partition) from the source's recorded problems, so a
later incremental run (of the same source, or another source's run) neither hides
nor turns them green; tables show messages literally; metadata, tags and checks are
readable; partitions that name no configured source are rejected cleanly; MCP
``reindex`` counts failures as ``status`` does. Real Dagster instances, LanceDB,
Tantivy and the bundled model."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from rag_assets import checks
from rag_serving.config import RaglineConfig, parse_config_file
from tests.conftest import write_config

WEIRD = "weird <b>tag<b> *x* | y.md"  # a broken file whose name is Markdown and HTML


def _instance(config: RaglineConfig):
    from rag_assets.instance import open_instance

    return open_instance(config.data_dir)


def _index(config: RaglineConfig, *names: str) -> list[Any]:
    from ragline.indexing import index_sources

    outcomes = index_sources(config, list(names), full=False)
    assert all(o.success for o in outcomes), [o.error for o in outcomes]
    return outcomes


def write_problem_sources(root: Path, sample_vault: Path) -> Path:
    """Two sources under ``root``: notes (the sample's broken files plus a binary file
    named ``WEIRD``) and journal; returns the config's path."""
    notes, journal = root / "notes", root / "journal"
    shutil.copytree(sample_vault / "notes", notes)
    shutil.copytree(sample_vault / "journal", journal)
    (notes / WEIRD).write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00")
    sources = [
        {"name": "notes", "kind": "markdown", "path": str(notes)},
        {"name": "journal", "kind": "markdown", "path": str(journal)},
    ]
    return write_config(root, sources)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, sample_vault: Path) -> dict[str, Any]:
    """notes (with broken files) and journal indexed; then another note of ``notes``
    edited and only ``notes`` re-indexed; then ``journal`` re-indexed."""
    root = tmp_path_factory.mktemp("problems")
    config = parse_config_file(write_problem_sources(root, sample_vault))
    notes = root / "notes"
    first = _index(config)
    edited = notes / "Kubernetes.md"
    edited.write_text(edited.read_text() + "\nA later edit about rollouts.\n")
    os.utime(edited, (edited.stat().st_atime, edited.stat().st_mtime + 10))
    [incremental] = _index(config, "notes")
    [other] = _index(config, "journal")
    return {"root": root, "config": config, "first": first, "incremental": incremental,
            "other": other}  # fmt: skip


def _latest_check(config: RaglineConfig, partition: str, name: str = checks.ITEMS_INDEXED):
    from dagster import AssetCheckKey, AssetKey

    asset = "parsed_documents" if name == checks.ITEMS_INDEXED else "embeddings"
    key = AssetCheckKey(AssetKey(asset), name)
    history = _instance(config).event_log_storage.get_asset_check_execution_history(key, limit=50)
    mine = [r for r in history if r.partition == partition]
    assert mine, f"no {name} evaluation recorded for partition {partition!r}"
    return mine[0]  # newest first


def test_items_indexed_keeps_showing_a_sources_problems_after_later_runs(
    indexed: dict[str, Any],
) -> None:
    config = indexed["config"]
    incremental = indexed["incremental"].metadata["parsed_documents"]
    # The incremental run parsed only the edited note: none of the broken files.
    assert incremental["changed"] == 1 and incremental["failed"] == incremental["skipped"] == 0
    record = _latest_check(config, "notes")
    assert record.run_id == indexed["incremental"].run_id
    evaluation = record.event.dagster_event.event_specific_data
    assert evaluation.passed is False and evaluation.severity.value == "WARN"
    assert evaluation.partition == "notes"
    values = {k: v.value for k, v in evaluation.metadata.items()}
    assert values["failed"] == 1 and values["skipped"] == 3
    items = {r.data["item"]: r.data for r in values["items"].records}
    assert {"invalid utf8.md", "binary.md", "empty.md", WEIRD} <= set(items)
    assert items["invalid utf8.md"]["severity"] == "error"
    assert "UTF-8" in items["invalid utf8.md"]["reason"]
    assert "invalid utf8.md" in evaluation.description
    # journal's later run, with no problem, passes on its own partition only.
    assert _latest_check(config, "journal").event.dagster_event.event_specific_data.passed
    assert _latest_check(config, "notes").run_id == indexed["incremental"].run_id


def test_problem_tables_show_names_and_messages_literally(indexed: dict[str, Any]) -> None:
    problems = indexed["first"][0].metadata["parsed_documents"]["problems"]
    assert "`weird <b>tag<b> *x* \\| y.md`" in problems  # a code span: literal, pipe escaped
    table = checks.problems_table(
        [("a.md", "error", "expected <tag> | got *this* _or_ [that](x) `code`\nnext line")]
    )
    row = table.splitlines()[2]
    assert row == (
        "| `a.md` | error | expected &lt;tag&gt; \\| got \\*this\\* \\_or\\_ \\[that\\](x) "
        "\\`code\\` next line |"
    )
    assert checks.markdown_code("odd`name.md") == "``odd`name.md``"
    many = checks.problems_table([(f"note {i}.md", "error", "x" * 150) for i in range(40)])
    assert len(many) < checks.INLINE_MARKDOWN_CHARS + 100  # the UI shows it without a click
    assert "more: `ragline status` lists them all" in many


def test_every_check_has_a_description_and_a_partition_per_source() -> None:
    from rag_assets.definitions import defs

    specs = list(defs.resolve_asset_graph().asset_check_keys)
    assert len(specs) == 5
    for key in specs:
        spec = defs.resolve_assets_def(key.asset_key).get_spec_for_check_key(key)
        assert spec.description and len(spec.description) > 40, key
        assert spec.partitions_def is not None and spec.partitions_def.name == "sources"


def test_metadata_and_tags_are_readable(indexed: dict[str, Any]) -> None:
    config = indexed["config"]
    notes = indexed["first"][0]
    for asset, values in notes.metadata.items():
        assert values["source_kind"] == "markdown", asset
        assert values["source_path"] == str(indexed["root"] / "notes"), asset
        assert not [k for k in values if k.startswith("search_index/")], asset
        assert "generation" not in values, asset
    assert notes.metadata["embeddings"]["embedder"].startswith(
        "sentence-transformers:all-MiniLM-L6-v2 (384 dims"
    )
    run = _instance(config).get_run_by_id(notes.run_id)
    assert "ragline/pid_started" not in run.tags and "ragline/pid" not in run.tags
    assert re.fullmatch(
        r"pid \d+ on \S+ since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC",
        run.tags["ragline/process"],
    )


def test_a_killed_runs_readable_tag_still_lets_it_be_reaped(indexed: dict[str, Any]) -> None:
    from dagster import DagsterRun, DagsterRunStatus
    from dagster._core.utils import make_new_run_id

    from rag_assets.recovery import PROCESS_TAG, reap_dead_runs

    instance = _instance(indexed["config"])
    host = os.uname().nodename
    run = instance.add_run(
        DagsterRun(
            job_name="index_source", run_id=make_new_run_id(), status=DagsterRunStatus.STARTED,
            tags={PROCESS_TAG: f"pid 1 on {host} since 2000-01-01 00:00:00.000 UTC"},
        )
    )  # fmt: skip
    assert run.run_id in reap_dead_runs(instance)
    assert instance.get_run_by_id(run.run_id).status == DagsterRunStatus.FAILURE


def test_a_partition_for_no_configured_source_fails_in_one_line_and_is_removed(
    indexed: dict[str, Any],
) -> None:
    from dagster import build_sensor_context

    from rag_assets.definitions import defs
    from rag_assets.jobs import INDEX_JOB_NAME
    from rag_assets.resources import RaglineConfigResource
    from rag_assets.sensors.source_partitions import build_source_partitions_sensor

    config = indexed["config"]
    instance = _instance(config)
    instance.add_dynamic_partitions("sources", ["typo"])
    os.environ["RAGLINE_CONFIG"] = str(config.config_path)
    result = defs.resolve_job_def(INDEX_JOB_NAME).execute_in_process(
        partition_key="typo", instance=instance, raise_on_error=False
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    message = failure.event_specific_data.error.message
    assert "unknown source 'typo'" in message and "add a [[sources]] entry named 'typo'" in message
    assert len([line for line in message.strip().splitlines() if line.strip()]) == 1

    sensor = build_source_partitions_sensor(30)
    context = build_sensor_context(
        instance=instance,
        resources={"settings": RaglineConfigResource(config_path=str(config.config_path))},
    )
    tick = sensor(context)
    [delete] = tick.dynamic_partitions_requests
    assert list(delete.partition_keys) == ["typo"]
    assert type(delete).__name__ == "DeleteDynamicPartitionsRequest"


def test_reindex_summary_counts_the_sources_problems_like_status(
    indexed: dict[str, Any],
) -> None:
    from rag_serving.mcp.reindex import Reindexer
    from rag_serving.status import index_status

    config = indexed["config"]
    note = Path(config.source("notes").path) / "finance" / "Budget.md"
    note.write_text(note.read_text() + "\nOne more line.\n")
    outcome = Reindexer(config).run("notes", full=False, wait_s=300)
    assert outcome.success, outcome.error
    assert outcome.assets["parsed_documents"]["failed"] == 0  # this run parsed no broken file
    [state] = [s for s in index_status(config, check_pending=False).sources if s.name == "notes"]
    assert (state.count("error"), state.count("skipped")) == (1, 3)
    assert "1 failed, 3 skipped" in outcome.summary()
