"""`ragline watch`: file events index a source in the long-lived process, each run
recorded in Dagster; bursts coalesce; the sensor stays the safety net."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance, RunsFilter, build_sensor_context, instance_for_test

from rag_assets.resources import RaglineConfigResource
from rag_assets.sensors.source_changes import build_source_changes_sensor
from rag_serving.config import RaglineConfig
from rag_serving.search import SearchEngine
from rag_serving.watchers import live_watcher
from ragline.watching import SourceWatcher
from tests.conftest import build_index, write_config

WAIT_S = 180  # generous: the suite shares two cores; the benchmark measures speed


class Watched:
    def __init__(self, config: RaglineConfig, vault: Path, process: subprocess.Popen, log: Path):
        self.config = config
        self.vault = vault
        self.process = process
        self.log = log
        self.engine = SearchEngine(config)
        self.instance = DagsterInstance.from_config(str(config.data_dir / "dagster"))

    def watch_runs(self) -> list:
        runs = self.instance.get_runs(filters=RunsFilter(tags={"ragline/launched_by": "watch"}))
        return [r for r in runs if r.is_finished]

    def finds(self, token: str) -> list[str]:
        hits = self.engine.search(token, k=5, mode="bm25").hits
        return [h.path for h in hits if token in h.snippet.replace("**", "")]

    def wait_for(self, token: str, present: bool = True) -> list[str]:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            found = self.finds(token)
            if bool(found) == present:
                return found
            assert self.process.poll() is None, self.log.read_text()
            time.sleep(0.2)
        pytest.fail(
            f"{token} {'never appeared' if present else 'never went'}:\n{self.log.read_text()}"
        )

    def settle(self) -> int:
        """Wait until no watch run is going and the output is quiet; the runs so far."""
        last, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < 3:
            runs = self.instance.get_runs(filters=RunsFilter(tags={"ragline/launched_by": "watch"}))
            count = (len(runs), sum(r.is_finished for r in runs))
            if count != last:
                last, quiet_since = count, time.monotonic()
            time.sleep(0.2)
        return last[1]


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory, sample_vault: Path) -> Iterator[Watched]:
    root = tmp_path_factory.mktemp("watch")
    vault = root / "vault"
    shutil.copytree(sample_vault / "notes", vault)
    config = build_index(
        write_config(root, [{"name": "notes", "kind": "markdown", "path": str(vault)}])
    )
    log = root / "watch.log"
    env = dict(os.environ)
    env.pop("DAGSTER_HOME", None)
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "ragline.cli", "--config", str(config.config_path), "watch",
             "--no-catch-up"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + WAIT_S
    while "Watching notes" not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    watched = Watched(config, vault, process, log)
    try:
        yield watched
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _save_like_obsidian(path: Path, text: str) -> None:
    """Write a temporary file beside ``path`` and rename it over it (one change)."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:6]}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _notes(vault: Path) -> list[Path]:
    """The vault's plain, readable notes (the sample vault holds broken ones too)."""
    found = []
    for path in sorted(vault.rglob("*.md")):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(vault)
        hidden = any(part.startswith(".") for part in rel.parts)
        if text.strip() and not hidden and not path.name.startswith("Broken"):
            found.append(path)
    return found


def _token() -> str:
    return "zq" + uuid.uuid4().hex[:10]


def test_a_save_by_rename_is_searchable_in_one_recorded_run(watched: Watched) -> None:
    before = watched.settle()
    note = _notes(watched.vault)[0]
    token = _token()
    _save_like_obsidian(note, note.read_text(encoding="utf-8") + f"\n\nA saved line {token}.\n")
    assert watched.wait_for(token) == [note.relative_to(watched.vault).as_posix()]
    assert watched.settle() == before + 1
    [run] = watched.watch_runs()[:1]  # newest first
    assert run.tags["dagster/partition"] == "notes"
    assert run.tags["ragline/changed"] == "1"  # the temporary file is not the source's
    materialized = watched.instance.get_latest_materialization_event(
        __import__("dagster").AssetKey("embeddings")
    )
    assert materialized is not None and materialized.run_id == run.run_id


def test_a_burst_of_saves_is_one_run(watched: Watched) -> None:
    before = watched.settle()
    notes = _notes(watched.vault)[:5]
    tokens = [_token() for _ in notes]
    for note, token in zip(notes, tokens, strict=True):
        note.write_text(note.read_text(encoding="utf-8") + f"\n\nBurst {token}.\n")
    for token in tokens:
        watched.wait_for(token)
    assert watched.settle() == before + 1
    assert len(notes) == 5
    assert watched.watch_runs()[0].tags["ragline/changed"] == "5"


def test_create_rename_and_delete_follow_the_folder(watched: Watched) -> None:
    token = _token()
    created = watched.vault / "fresh" / "New idea.md"
    created.parent.mkdir()
    created.write_text(f"# New idea\n\nSomething about {token}.\n", encoding="utf-8")
    assert watched.wait_for(token) == ["fresh/New idea.md"]

    moved = watched.vault / "renamed"
    created.parent.rename(moved)  # a folder renamed: reported under the folder's name
    deadline = time.monotonic() + WAIT_S
    while watched.finds(token) != ["renamed/New idea.md"]:
        assert time.monotonic() < deadline, watched.log.read_text()
        time.sleep(0.2)

    (moved / "New idea.md").unlink()
    watched.wait_for(token, present=False)


def test_files_the_source_does_not_index_start_no_run(watched: Watched) -> None:
    before = watched.settle()
    settings = watched.vault / ".obsidian"
    settings.mkdir(exist_ok=True)
    (settings / "workspace.json").write_text(json.dumps({"active": _token()}))
    (watched.vault / "scratch.tmp").write_text("not a note")
    (watched.vault / "scratch.tmp").unlink()
    time.sleep(2)
    assert watched.settle() == before


def test_a_clip_is_indexed_by_the_running_watcher(watched: Watched, tmp_path: Path) -> None:
    """`ragline clip` sees the watcher's marker and waits for its run instead of
    starting one of its own."""
    import tomli_w
    from click.testing import CliRunner

    from ragline.cli import cli

    watcher = live_watcher(watched.config, "notes")
    assert watcher is not None and watcher.pid == watched.process.pid
    token = _token()
    page = tmp_path / "page.html"
    page.write_text(
        f"<html><head><title>Pumps {token}</title></head><body><main><h1>Pumps</h1>"
        f"<p>Centrifugal pumps {token} move water with an impeller.</p></main></body></html>",
        encoding="utf-8",
    )
    config = tmp_path / "clip.toml"
    config.write_bytes(tomli_w.dumps({
        "data_dir": str(watched.config.data_dir),
        "sources": [{"name": "notes", "kind": "markdown", "path": str(watched.vault)}],
        "clip": {"source": "notes", "folder": "clippings"},
    }).encode())  # fmt: skip
    before = watched.settle()
    result = CliRunner().invoke(cli, ["--config", str(config), "clip", str(page), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["indexed"]["via"] == "watch" and out["indexed"]["success"] is True, out
    assert out["path"] in watched.finds(token)  # searchable when the command returned
    assert watched.settle() > before  # the watcher's run, not one of the command's own


def test_the_sensor_skips_what_watch_indexed_and_catches_what_it_missed(watched: Watched) -> None:
    sensor = build_source_changes_sensor(30)
    resources = {"settings": RaglineConfigResource(config_path=str(watched.config.config_path))}
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["notes"])
        first = sensor(build_sensor_context(instance=instance, resources=resources))
        # A change the watcher indexes: the sensor's next tick runs nothing for it.
        note = _notes(watched.vault)[-1]
        token = _token()
        note.write_text(note.read_text(encoding="utf-8") + f"\n\n{token}\n")
        watched.wait_for(token)
        watched.settle()
        tick = sensor(
            build_sensor_context(instance=instance, cursor=first.cursor, resources=resources)
        )
        assert not tick.run_requests
        assert "indexed by `ragline watch`" in tick.skip_reason.skip_message
        # A change no event reported (the watcher stopped): the sensor runs the source.
        watched.process.send_signal(signal.SIGTERM)
        assert watched.process.wait(timeout=60) == 0, watched.log.read_text()
        assert live_watcher(watched.config, "notes") is None  # its marker went with it
        assert not list((watched.config.data_dir / "watch").glob("*.json"))
        note.write_text(note.read_text(encoding="utf-8") + "\n\nmissed\n")
        missed = sensor(
            build_sensor_context(instance=instance, cursor=tick.cursor, resources=resources)
        )
        assert [r.partition_key for r in missed.run_requests] == ["notes"]


def test_events_map_to_the_sources_they_may_change(tmp_path: Path, sample_vault: Path) -> None:
    notes, journal = tmp_path / "notes", tmp_path / "journal"
    shutil.copytree(sample_vault / "notes", notes)
    shutil.copytree(sample_vault / "journal", journal)
    data_dir = notes / ".ragline"  # the index inside a watched folder
    config_path = write_config(
        tmp_path,
        [{"name": "notes", "kind": "markdown", "path": str(notes)},
         {"name": "journal", "kind": "markdown", "path": str(journal)},
         {"name": "feeds", "kind": "feeds", "urls": ["http://127.0.0.1:9/feed.xml"]}],
        data_dir=data_dir,
    )  # fmt: skip
    from rag_serving.config import parse_config_file

    watcher = SourceWatcher(parse_config_file(config_path))
    assert [s.name for s in watcher.sources] == ["notes", "journal"]
    assert any("feeds" in note and "sensor" in note for note in watcher.notes)
    events = [
        notes / "a.md", notes / "deep" / "b.md", journal / "2024-01-01.md",
        notes / ".obsidian" / "workspace.json", notes / ".trash" / "old.md",
        data_dir / "lancedb" / "chunks.lance" / "x.md", notes / "image.tmp",
        notes / "gone-folder", tmp_path / "elsewhere.md",
    ]  # fmt: skip
    assert watcher.touched(str(path) for path in events) == {"notes": 3, "journal": 1}


def test_watch_compacts_the_index_once_idle_after_runs(
    tmp_path: Path, sample_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every watch run adds LanceDB fragments; once no event came for
    ``maintain_after_s`` after a run, the watcher runs the maintenance job in its
    process (recorded in Dagster), which compacts them — once, until the next run."""
    import threading

    vault = tmp_path / "vault"
    shutil.copytree(sample_vault / "journal", vault)
    config = build_index(
        write_config(tmp_path, [{"name": "j", "kind": "markdown", "path": str(vault)}])
    )
    monkeypatch.setenv("RAGLINE_CONFIG", str(config.config_path))
    watcher = SourceWatcher(config, maintain_after_s=3.0)
    ready, stop = threading.Event(), threading.Event()
    runs: list = []
    maintained: list = []

    def watch() -> None:
        watcher.run(on_run=runs.append, stop=stop, on_ready=ready.set, catch_up=False,
                    on_maintenance=maintained.append)  # fmt: skip

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        assert ready.wait(WAIT_S)
        notes = _notes(vault)
        for i in range(3):  # three runs, each adding fragments
            note = notes[i % len(notes)]
            _save_like_obsidian(note, note.read_text(encoding="utf-8") + f"\n\nedit {i}\n")
            deadline = time.monotonic() + WAIT_S
            while len(runs) <= i and time.monotonic() < deadline:
                time.sleep(0.1)
        assert len(runs) == 3 and all(r.outcome.success for r in runs)
        store = SearchEngine(config).store
        table = store.chunks(SearchEngine(config).generation.table)  # type: ignore[union-attr]
        before = table.stats()["fragment_stats"]["num_fragments"]
        assert before > 1 and not maintained
        deadline = time.monotonic() + WAIT_S
        while not maintained and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(maintained) == 1 and maintained[0].success
        table.checkout_latest()
        assert table.stats()["fragment_stats"]["num_fragments"] < before
        time.sleep(4)  # idle again, but no run since: nothing to compact
        assert len(maintained) == 1
    finally:
        stop.set()
        thread.join(WAIT_S)
    instance = DagsterInstance.from_config(str(config.data_dir / "dagster"))
    recorded = instance.get_runs(filters=RunsFilter(job_name="maintenance_job"))
    assert [r.tags.get("ragline/launched_by") for r in recorded] == ["watch"]
    assert recorded[0].run_id == maintained[0].run_id and recorded[0].is_success
