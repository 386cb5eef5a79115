"""The sensors with real Dagster instances: partitions follow the config; changed
sources (and only those) get runs with fingerprint run keys; SkipReasons say why."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from dagster import (
    AssetMaterialization,
    DagsterInstance,
    SensorResult,
    SkipReason,
    build_sensor_context,
    instance_for_test,
)

from rag_assets.definitions import defs
from rag_assets.resources import RaglineConfigResource
from rag_assets.sensors.source_changes import build_source_changes_sensor
from rag_assets.sensors.source_partitions import build_source_partitions_sensor
from tests.conftest import write_config


def _vault(tmp_path: Path, sample_vault: Path) -> tuple[Path, Path]:
    notes, journal = tmp_path / "notes", tmp_path / "journal"
    shutil.copytree(sample_vault / "notes", notes)
    shutil.copytree(sample_vault / "journal", journal)
    return notes, journal


def _tick(sensor, instance: DagsterInstance, config_path: Path, cursor: str | None = None):
    context = build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"settings": RaglineConfigResource(config_path=str(config_path))},
    )
    return sensor(context)


def test_sensors_are_registered_running_by_default() -> None:
    from dagster import DefaultSensorStatus

    sensors = {s.name: s for s in defs.sensors}
    assert set(sensors) == {"source_partitions", "source_changes", "run_failures"}
    assert all(s.default_status == DefaultSensorStatus.RUNNING for s in sensors.values())
    assert sensors["source_changes"].minimum_interval_seconds == 30


def test_partition_sensor_adds_configured_sources(tmp_path: Path, sample_vault: Path) -> None:
    notes, journal = _vault(tmp_path, sample_vault)
    config_path = write_config(
        tmp_path,
        [{"name": "notes", "kind": "markdown", "path": str(notes)},
         {"name": "journal", "kind": "markdown", "path": str(journal)}],
    )  # fmt: skip
    sensor = build_source_partitions_sensor(30)
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["old"])
        # "old" was indexed once (it holds data), so it stays until `sources prune`.
        instance.report_runless_asset_event(AssetMaterialization("raw_files", partition="old"))
        result = _tick(sensor, instance, config_path)
        assert isinstance(result, SensorResult)
        added = result.dynamic_partitions_requests[0]
        assert sorted(added.partition_keys) == ["journal", "notes"]
        instance.add_dynamic_partitions("sources", list(added.partition_keys))
        again = _tick(sensor, instance, config_path)
        assert isinstance(again, SkipReason)
        assert "no longer configured: old" in again.skip_message
        assert "sources prune" in again.skip_message


def test_change_sensor_requests_runs_for_changed_sources_only(
    tmp_path: Path, sample_vault: Path
) -> None:
    notes, journal = _vault(tmp_path, sample_vault)
    config_path = write_config(
        tmp_path,
        [{"name": "notes", "kind": "markdown", "path": str(notes)},
         {"name": "journal", "kind": "markdown", "path": str(journal)}],
    )  # fmt: skip
    sensor = build_source_changes_sensor(30)
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["notes", "journal"])
        first = _tick(sensor, instance, config_path)
        assert {r.partition_key for r in first.run_requests} == {"notes", "journal"}
        cursor = first.cursor
        assert len(cursor) < 200  # compact: one short fingerprint per source
        assert all(r.run_key.startswith(f"{r.partition_key}:") for r in first.run_requests)

        quiet = _tick(sensor, instance, config_path, cursor)
        assert not quiet.run_requests
        assert "no changes in 2 source(s)" in quiet.skip_reason.skip_message

        note = journal / "2023-01-15.md"
        original, stat = note.read_bytes(), note.stat()
        note.write_text(note.read_text() + "\nA marmot whistled.\n")
        later = time.time() + 5
        os.utime(note, (later, later))
        changed = _tick(sensor, instance, config_path, cursor)
        assert [r.partition_key for r in changed.run_requests] == ["journal"]
        fingerprint = json.loads(changed.cursor)["journal"]
        assert changed.run_requests[0].run_key == f"journal:{fingerprint}:2"
        assert json.loads(changed.cursor)["notes"] == json.loads(cursor)["notes"]

        # Back to the first state (a note created, then deleted): a run all the same,
        # under a run key Dagster has not seen (it drops a request with a used one).
        note.write_bytes(original)
        os.utime(note, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        back = _tick(sensor, instance, config_path, changed.cursor)
        [request] = back.run_requests
        assert json.loads(back.cursor)["journal"] == json.loads(cursor)["journal"]
        first_keys = {r.run_key for r in first.run_requests}
        assert request.run_key not in first_keys | {changed.run_requests[0].run_key}


def test_change_sensor_waits_for_partitions_and_survives_a_missing_folder(
    tmp_path: Path, sample_vault: Path
) -> None:
    notes, _journal = _vault(tmp_path, sample_vault)
    config_path = write_config(
        tmp_path,
        [{"name": "notes", "kind": "markdown", "path": str(notes)},
         {"name": "journal", "kind": "markdown", "path": str(tmp_path / "gone")}],
    )  # fmt: skip
    sensor = build_source_changes_sensor(30)
    with instance_for_test() as instance:
        result = _tick(sensor, instance, config_path)
        assert not result.run_requests
        assert "not a partition yet" in result.skip_reason.skip_message
        instance.add_dynamic_partitions("sources", ["notes", "journal"])
        result = _tick(sensor, instance, config_path)
        assert [r.partition_key for r in result.run_requests] == ["notes"]


def test_changing_the_embedder_settings_makes_every_source_due(
    tmp_path: Path, sample_vault: Path
) -> None:
    notes, _ = _vault(tmp_path, sample_vault)
    sources = [{"name": "notes", "kind": "markdown", "path": str(notes)}]
    config_path = write_config(tmp_path, sources)
    sensor = build_source_changes_sensor(30)
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["notes"])
        cursor = _tick(sensor, instance, config_path).cursor
        import tomli_w

        config_path.write_bytes(tomli_w.dumps({
            "data_dir": str(tmp_path / "data"), "chunking": {"target_tokens": 120}, "sources": sources,
        }).encode())  # fmt: skip
        result = _tick(sensor, instance, config_path, cursor)
        assert [r.partition_key for r in result.run_requests] == ["notes"]


def test_change_sensor_asks_once_for_a_deferred_pass(tmp_path: Path, sample_vault: Path) -> None:
    """A run that queued OCR leaves a marker; the sensor requests one deferred pass per
    marker (its mtime is in the cursor) and nothing once the marker is gone."""
    from rag_serving.config import parse_config_file
    from rag_serving.index.layout import IndexLayout

    notes, _ = _vault(tmp_path, sample_vault)
    config_path = write_config(
        tmp_path, [{"name": "notes", "kind": "markdown", "path": str(notes)}]
    )
    marker = IndexLayout(parse_config_file(config_path).data_dir).deferred_marker("notes")
    sensor = build_source_changes_sensor(30)
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["notes"])
        first = _tick(sensor, instance, config_path)
        assert [r.tags.get("ragline/pass") for r in first.run_requests] == [None]
        marker.parent.mkdir(parents=True)
        marker.write_text("1\n")
        queued = _tick(sensor, instance, config_path, first.cursor)
        [request] = queued.run_requests
        assert request.tags["ragline/pass"] == "deferred" and request.partition_key == "notes"
        again = _tick(sensor, instance, config_path, queued.cursor)
        assert not again.run_requests
        marker.unlink()
        done = _tick(sensor, instance, config_path, again.cursor)
        assert not done.run_requests
