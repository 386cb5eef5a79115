"""Honest run outcomes, through the real CLI in a subprocess with stdout and stderr
piped (not a terminal), on real Dagster, LanceDB, Tantivy and the bundled model:

- a source none of whose items is indexed because they failed (any kind: Markdown
  files, feeds) is a failed run: exit code 1, ✗ with the first reason, the Dagster
  run failed with that reason first, `status` says FAILED; again on a re-run that
  changes nothing; a source of 0 items is not a failure;
- a source where some items failed says how many, and a re-run says the problems
  standing are unchanged (not "0 failed"); the materialization carries the standing
  counts beside the run's own;
- off a terminal, progress goes to stderr as plain lines; `--progress ndjson` writes
  only JSON events on stdout (progress, problems, each source, complete), errors on
  stderr; exit codes 0 / 1 / 2;
- an error inside a step reaches Dagster as a Failure whose description is the
  readable cause (what the run's page shows first)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rag_serving.config import parse_config_file
from tests.conftest import write_config
from tests.feed_server import FeedServer, unused_port
from tests.test_run_failures import journal_with_dead_embedder

REPO = Path(__file__).resolve().parents[1]


def ragline(config_path: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess, stdout and stderr piped (neither is a terminal)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAGLINE_CONFIG")}
    return subprocess.run(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), *args],
        cwd=config_path.parent, env=env, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def write_sources(root: Path, sample_vault: Path, slow_url: str | None = None) -> Path:
    """notes (some items broken), broken (every file broken), feeds (every feed
    broken: local files and an OPML of feeds nothing serves, or ``slow_url``, which
    answers 404 after a few seconds) and empty."""
    notes, broken, feeds, empty = (root / n for n in ("notes", "broken", "feeds", "empty"))
    shutil.copytree(sample_vault / "notes", notes, ignore=shutil.ignore_patterns("drafts"))
    broken.mkdir()
    (broken / "a.md").write_bytes(b"caf\xe9 au lait\n")
    (broken / "b.md").write_bytes(b"\xff\xfe\x00 not text \xe9")
    feeds.mkdir()
    (feeds / "notafeed.xml").write_text("this is not a feed at all\n")
    port = unused_port()
    (feeds / "subscriptions.opml").write_text(
        '<?xml version="1.0"?><opml version="2.0"><head><title>subs</title></head><body>'
        f'<outline text="a" type="rss" xmlUrl="http://127.0.0.1:{port}/a.xml"/>'
        f'<outline text="b" type="rss" xmlUrl="{slow_url or f"http://127.0.0.1:{port}/b.xml"}"/>'
        "</body></opml>"
    )
    empty.mkdir()
    return write_config(
        root,
        [
            {"name": "notes", "kind": "markdown", "path": str(notes)},
            {"name": "broken", "kind": "markdown", "path": str(broken)},
            {
                "name": "feeds", "kind": "feeds", "opml": str(feeds / "subscriptions.opml"),
                "urls": [str(feeds / "notafeed.xml"), str(feeds / "gone.xml")],
                "timeout_seconds": 5,
            },
            {"name": "empty", "kind": "markdown", "path": str(empty)},
        ],
    )  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, sample_vault: Path) -> dict[str, Any]:
    """A first `ragline index` (plain progress); one more broken note; a re-run of
    everything with `--progress ndjson`; then `ragline index notes`: nothing changed."""
    root = tmp_path_factory.mktemp("reporting")
    with FeedServer() as server:
        # A feed that answers (404) only after 2.5 s: the feeds' scan outlasts the
        # first second, so plain progress has a stage to report however fast the
        # machine embeds.
        server.put("/slow.xml", b"gone", content_type="text/plain", delay_s=2.5, status=404)
        config_path = write_sources(root, sample_vault, server.url("/slow.xml"))
        first = ragline(config_path, "index")
        (root / "notes" / "later broken.md").write_bytes(b"# Later\n\nna\xefve\n")
        again = ragline(config_path, "index", "--progress", "ndjson")
        notes = ragline(config_path, "index", "notes")
        notes_ndjson = ragline(config_path, "index", "notes", "--progress", "ndjson")
        status = json.loads(ragline(config_path, "status", "--json").stdout)
    return {"root": root, "config_path": config_path, "first": first, "again": again,
            "notes": notes, "notes_ndjson": notes_ndjson, "status": {s["name"]: s for s in status["sources"]}}  # fmt: skip


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_a_source_whose_every_item_failed_is_a_failed_run(runs: dict[str, Any]) -> None:
    first = runs["first"]
    assert first.returncode == 1, first.stderr[-3000:]
    err = _one_line(first.stderr)
    # any kind: Markdown files and feeds (local files, an OPML's feeds nothing serves)
    assert "✗ broken: nothing is indexed: all 2 of its items failed (first: a.md:" in err
    assert "✗ feeds: nothing is indexed: all 4 of its items failed (first:" in err
    assert "`ragline status` lists them" in err
    assert str(runs["root"]) not in err  # no server paths in the one-line causes
    assert "Traceback" not in first.stderr  # the run's log keeps the trace, not the CLI
    out = _one_line(first.stdout)
    assert "✓ empty: 0 items" in out  # nothing to index is not a failure
    assert "✗" not in first.stdout  # failures go to stderr

    # `status`: FAILED, in the stage where the items failed, with the same cause
    broken = runs["status"]["broken"]
    assert broken["last_failure"]["step"] == "parsed_documents"
    assert broken["last_failure"]["message"].startswith("nothing is indexed: all 2 of its items")
    assert broken["documents"] == 0 and len(broken["errors"]) == 2
    assert runs["status"]["feeds"]["last_failure"] is not None
    assert runs["status"]["notes"]["last_failure"] is None
    assert runs["status"]["empty"]["last_failure"] is None

    # A re-run that changes nothing still fails: the source still indexes nothing.
    events = [json.loads(line) for line in runs["again"].stdout.splitlines()]
    outcomes = {e["source"]: e for e in events if e["type"] == "source"}
    assert outcomes["broken"]["outcome"] == "failed" and not outcomes["broken"]["success"]
    assert outcomes["broken"]["problems"]["found_by_this_run"] == 0  # unchanged, yet failed
    assert outcomes["feeds"]["outcome"] == "failed"
    assert outcomes["empty"]["outcome"] == "success"


def test_the_failed_run_in_dagster_reads_its_cause_first(runs: dict[str, Any]) -> None:
    from dagster import AssetCheckKey, AssetKey, DagsterRunStatus, RunsFilter

    from rag_assets.instance import open_instance

    config = parse_config_file(runs["config_path"])
    instance = open_instance(config.data_dir)
    [record, *_] = instance.get_run_records(
        filters=RunsFilter(tags={"dagster/partition": "broken"}), limit=1
    )
    assert record.dagster_run.status == DagsterRunStatus.FAILURE
    logs = [e.dagster_event for e in instance.all_logs(record.dagster_run.run_id)]
    [failure] = [e for e in logs if e is not None and e.is_run_failure]
    # the run's failure (its page opens there) reads the cause first
    first_line = failure.event_specific_data.error.message.splitlines()[0]
    assert "nothing is indexed: all 2 of its items failed (first: a.md: " in first_line
    assert "DagsterExecutionStepExecutionError" not in first_line
    [step] = [e for e in logs if e is not None and e.is_step_failure]
    data = step.event_specific_data
    assert step.step_key == "fulltext_index"  # after every stage cleaned up
    assert data.user_failure_data.description.startswith("nothing is indexed")
    assert {k: v.value for k, v in data.user_failure_data.metadata.items()}["failed_standing"] == 2
    # The check of that step was still evaluated (not reported as an execution failure).
    key = AssetCheckKey(AssetKey("fulltext_index"), "tantivy_matches_lancedb")
    history = instance.event_log_storage.get_asset_check_execution_history(key, limit=20)
    mine = [r for r in history if r.run_id == record.dagster_run.run_id]
    assert mine and mine[0].event.dagster_event.event_specific_data.passed


def test_some_failed_items_are_counted_and_a_rerun_says_they_are_unchanged(
    runs: dict[str, Any],
) -> None:
    notes = runs["status"]["notes"]
    failed, skipped = len(notes["errors"]), len(notes["skipped"])
    assert failed == 2 and skipped >= 2  # one more broken note before the second run
    items = notes["files"]
    first = _one_line(runs["first"].stdout)
    # the first run found them, and says how many of how many
    assert (
        f"notes: {items - 1} items (" in first
        and f"indexed; 1 of {items - 1} items failed, {skipped} skipped ({1 + skipped} found "
        "by this run) — `ragline status` lists them"
        in first
    ), first
    # the second found one more, and counts the others standing
    events = [json.loads(line) for line in runs["again"].stdout.splitlines()]
    [second] = [e for e in events if e["type"] == "source" and e["source"] == "notes"]
    assert second["outcome"] == "partial" and second["success"]
    assert second["problems"] == {"failed": 2, "skipped": skipped, "pending": 0,
                                  "found_by_this_run": 1, "unchanged": 1 + skipped}  # fmt: skip
    # a run that changed nothing says the problems stand, unchanged (not "0 failed")
    rerun = runs["notes"]
    assert rerun.returncode == 0, rerun.stderr[-3000:]  # items failing is not a failed run
    line = _one_line(rerun.stdout)
    assert (
        f"{failed + skipped} problems unchanged (2 of {items} items failed, {skipped} skipped)"
        in line
    ), line
    assert "0 failed" not in line
    # programs driving the indexer read items standing failed as a partial failure
    partial = runs["notes_ndjson"]
    assert partial.returncode == 1, partial.stderr[-3000:]
    events = [json.loads(line) for line in partial.stdout.splitlines()]
    [source] = [e for e in events if e["type"] == "source"]
    assert (source["success"], source["outcome"]) == (True, "partial")


def test_the_materialization_shows_the_problems_standing_beside_the_runs_own(
    runs: dict[str, Any],
) -> None:
    from dagster import AssetKey

    from rag_assets.instance import open_instance

    config = parse_config_file(runs["config_path"])
    instance = open_instance(config.data_dir)
    event = instance.get_latest_materialization_event(AssetKey("parsed_documents"))
    assert event is not None
    # the latest materialization of notes: the last `ragline index notes`, which parsed nothing
    records = instance.fetch_materializations(AssetKey("parsed_documents"), limit=20).records
    [notes, *_] = [r for r in records if r.partition_key == "notes"]
    values = {k: v.value for k, v in notes.asset_materialization.metadata.items()}
    skipped = len(runs["status"]["notes"]["skipped"])
    assert (values["failed"], values["skipped"]) == (0, 0)  # this run's own
    assert (values["failed_standing"], values["skipped_standing"]) == (2, skipped)
    assert values["problems_standing"] == 2 + skipped
    # a feeds source has no folder: its feeds and OPML file are named instead
    records = instance.fetch_materializations(AssetKey("raw_files"), limit=50).records
    [feeds, *_] = [r for r in records if r.partition_key == "feeds"]
    values = {k: v.value for k, v in feeds.asset_materialization.metadata.items()}
    assert "source_path" not in values
    assert values["source_location"] == "notafeed.xml, gone.xml, subscriptions.opml"


def test_progress_off_a_terminal_is_plain_lines_on_stderr(runs: dict[str, Any]) -> None:
    first = runs["first"]
    lines = first.stderr.splitlines()
    # The feeds' scan waits 2.5 s on a slow feed: that stage runs over a second.
    pattern = re.compile(
        r"^(notes|broken|feeds|empty): (scanning|parsing|chunking|embedding|full-text)"
        r"( \d+/\d+ \(\d+%\), \d+s|… \(\d+s\)| (\d+/\d+ )?done in \d+s)$"
    )
    progress = [line for line in lines if pattern.match(line)]
    assert progress, lines
    assert any(" done in " in line for line in progress)
    assert "\x1b" not in first.stderr and "\r" not in first.stderr  # no terminal codes


def test_ndjson_progress_is_json_on_stdout_with_a_final_complete_event(
    runs: dict[str, Any],
) -> None:
    again = runs["again"]
    assert again.returncode == 1  # broken and feeds still index nothing
    events = [json.loads(line) for line in again.stdout.splitlines()]  # nothing else
    assert events and events[-1]["type"] == "complete"
    assert {e["type"] for e in events} <= {"progress", "problem", "source", "complete"}
    progress = [e for e in events if e["type"] == "progress"]
    assert {e["phase"] for e in progress} >= {"scanning", "parsing", "chunking", "embedding"}
    assert {e["source"] for e in progress} == {"notes", "broken", "feeds", "empty"}
    for event in progress:
        assert set(event) == {"type", "source", "phase", "current", "total"}
        assert event["current"] >= 0 and (event["total"] == 0 or event["current"] <= event["total"])
    # problems as the run finds them: of notes, the one new broken note (the others
    # stand unchanged); the feeds, fetched again (asked for by a person), fail again
    problems = [e for e in events if e["type"] == "problem"]
    mine = [(e["path"], e["severity"]) for e in problems if e["source"] == "notes"]
    assert mine == [("later broken.md", "error")]
    assert {e["source"] for e in problems} == {"notes", "feeds"}
    assert all(e["severity"] == "error" and e["path"] and e["message"] for e in problems)
    first_source = next(i for i, e in enumerate(events) if e["type"] == "source")
    assert events.index(problems[0]) < first_source  # before notes' run ended
    complete = events[-1]
    status = runs["status"]
    assert complete["indexed_files"] == sum(s["documents"] for s in status.values())
    assert complete["total_chunks"] == sum(s["chunks"] for s in status.values()) > 0
    assert complete["duration_ms"] > 0
    assert complete["failed_sources"] == ["broken", "feeds"]
    errors = complete["errors"]
    runs_failed = [e for e in errors if e["path"] is None]
    assert [e["source"] for e in runs_failed] == ["broken", "feeds"]
    items = {(e["source"], e["path"]) for e in errors if e["path"] is not None}
    assert ("notes", "invalid utf8.md") in items and ("broken", "a.md") in items
    assert complete["errors_total"] == len(errors) == 2 + 2 + 2 + 4
    # errors on stderr, and no traceback
    assert "✗ broken: nothing is indexed" in _one_line(again.stderr)
    assert "Traceback" not in again.stderr


def test_ndjson_exit_codes_for_fatal_errors(runs: dict[str, Any]) -> None:
    config_path = runs["config_path"]
    unknown = ragline(config_path, "index", "nosuch", "--progress", "ndjson")
    assert unknown.returncode == 2
    assert unknown.stdout == ""
    assert "error: unknown source 'nosuch'" in unknown.stderr
    both = ragline(config_path, "index", "--json", "--progress", "ndjson")
    assert both.returncode == 2 and both.stdout == ""
    assert "--json and --progress ndjson both write to stdout" in both.stderr
    # A source folder that vanished stops the command before any run: fatal.
    root = runs["root"]
    moved = root / "empty-moved"
    (root / "empty").rename(moved)
    try:
        gone = ragline(config_path, "index", "empty", "--progress", "ndjson")
    finally:
        moved.rename(root / "empty")
    assert gone.returncode == 2 and gone.stdout == ""
    assert "does not exist" in gone.stderr


def test_a_step_error_reaches_dagster_as_a_failure_with_its_cause(
    tmp_path: Path, sample_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster import instance_for_test

    from rag_assets.definitions import defs
    from rag_assets.jobs import INDEX_JOB_NAME

    config_path = journal_with_dead_embedder(tmp_path, sample_vault)
    monkeypatch.setenv("RAGLINE_CONFIG", str(config_path))
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["journal"])
        result = defs.resolve_job_def(INDEX_JOB_NAME).execute_in_process(
            partition_key="journal", instance=instance, raise_on_error=False
        )
    assert not result.success
    [step] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    failure = step.event_specific_data.user_failure_data
    assert failure is not None, step.event_specific_data.error.message.splitlines()[0]
    assert failure.description.startswith("Ollama server not reachable at http://127.0.0.1:9")
    metadata = {k: v.value for k, v in failure.metadata.items()}
    assert metadata["source"] == "journal" and metadata["error"] == "EmbedderUnavailableError"
    # The run's failure (what its page shows last, where it opens) reads the cause first.
    run_error = result.get_run_failure_event().event_specific_data.error
    first_line = run_error.message.splitlines()[0]
    assert "Ollama server not reachable at http://127.0.0.1:9" in first_line, first_line
    assert "DagsterExecutionStepExecutionError" not in first_line


def test_plain_progress_writes_a_line_per_interval_and_quick_stages_none() -> None:
    from ragline.index_command import PlainProgress

    now = [0.0]
    lines: list[str] = []
    plain = PlainProgress(lines.append, interval_s=10, first_s=1, clock=lambda: now[0])
    plain.update("notes", "scan", 0, 0)
    plain.update("notes", "scan", 12, 12)  # done at once: nothing to say
    plain.update("notes", "embed", 0, 0)
    now[0] = 0.5
    plain.beat()
    assert lines == []
    now[0] = 1.2
    plain.update("notes", "embed", 150, 677)
    assert lines == ["notes: embedding 150/677 (22%), 1s"]
    now[0] = 6.0
    plain.update("notes", "embed", 300, 677)
    plain.beat()
    assert len(lines) == 1  # not yet 10 s since the last line
    now[0] = 11.3
    plain.beat()  # no news, still a line: the run is alive
    assert lines[-1] == "notes: embedding 300/677 (44%), 11s"
    now[0] = 75.0
    plain.update("notes", "embed", 677, 677)
    assert lines[-1] == "notes: embedding 677/677 done in 1m15s"
    plain.update("feeds", "scan", 0, 0)  # a fetch with no count yet
    now[0] = 77.0
    plain.beat()
    assert lines[-1] == "feeds: scanning… (2s)"
    assert len(lines) == 4


def test_ndjson_progress_events_are_throttled_but_keep_the_last() -> None:
    from ragline.index_command import NdjsonEvents

    now = [0.0]

    out = io.StringIO()
    events = NdjsonEvents(out, clock=lambda: now[0])
    for done in range(0, 1001, 100):
        events.progress("notes", "embed", done, 1000)
        now[0] += 0.01
    parsed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert parsed[0] == {"type": "progress", "source": "notes", "phase": "embedding",
                         "current": 0, "total": 1000}  # fmt: skip
    assert parsed[-1]["current"] == 1000 and len(parsed) == 2
