"""What a user sees in the Dagster UI (Debian's chromium driven by Playwright, the UI
started by `ragline ui`): a broken file stays visible on its source's partition
after a later incremental run of another file (the items_indexed check, as a
warning, with the file listed, and the problems standing beside the run's own
counts); a source whose every item failed is a failed partition whose run opens on
its cause; a feeds source names its feeds; and runs queued in the UI never write at
the same time (the writer pool admits one run at a time)."""

from __future__ import annotations

import itertools
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_serving.config import parse_config_file
from tests.test_problems_visible import WEIRD, write_problem_sources
from tests.test_ui import CHROMIUM, CHROMIUM_ARGS
from tests.ui_process import running_ragline_ui


def add_broken_feeds(root: Path, config_path: Path) -> None:
    """A feeds source ``news`` whose every feed is broken (a file that is no feed, a
    file that does not exist)."""
    feeds = root / "feeds"
    feeds.mkdir()
    (feeds / "notafeed.xml").write_text("this is not a feed at all\n")
    urls = ", ".join(f'"{feeds / name}"' for name in ("notafeed.xml", "gone.xml"))
    with config_path.open("a", encoding="utf-8") as out:
        out.write(f'\n[[sources]]\nname = "news"\nkind = "feeds"\nurls = [{urls}]\n')


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory, sample_vault: Path) -> Iterator[dict[str, Any]]:
    """notes (with broken files), journal and news (every feed broken) indexed, then
    another note of notes edited and notes re-indexed (incrementally); then `ragline ui`."""
    from ragline.indexing import index_sources

    root = tmp_path_factory.mktemp("ui-problems")
    config_path = write_problem_sources(root, sample_vault)
    add_broken_feeds(root, config_path)
    notes = root / "notes"
    config = parse_config_file(config_path)
    outcomes = {o.source: o for o in index_sources(config, [], full=False)}
    assert outcomes["notes"].success and outcomes["journal"].success
    assert not outcomes["news"].success  # nothing of it is indexed: a failed run
    edited = notes / "Kubernetes.md"
    edited.write_text(edited.read_text() + "\nA later edit.\n")
    [incremental] = index_sources(config, ["notes"], full=False)
    assert incremental.success and incremental.metadata["parsed_documents"]["failed"] == 0

    with running_ragline_ui(config_path, root, stdout=subprocess.DEVNULL) as url:
        yield {"url": url, "config": config, "root": root, "news_run": outcomes["news"].run_id}


def test_a_broken_file_stays_visible_on_its_partition(ui: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(ui["url"] + "/assets/parsed_documents?view=checks", wait_until="networkidle")
        page.wait_for_timeout(1500)
        skip = page.get_by_role("button", name="Skip")  # the first-visit community dialog
        if skip.count():
            skip.first.click()
        page.get_by_text("items_indexed", exact=True).first.wait_for(timeout=60_000)
        body = page.inner_text("body")
        assert "Every item (file) of the source is indexed" in body  # the description
        page.get_by_text("Partitions", exact=True).last.click()
        page.locator("text=notes >> visible=true").last.click()
        page.get_by_text("Description", exact=True).first.wait_for(timeout=30_000)
        page.wait_for_timeout(1000)
        notes = page.inner_text("body")
        page.screenshot(path=str(ui["root"] / "items-indexed-notes.png"), full_page=True)
        # The warning, its description and the table of items, shown without a click;
        # names that are Markdown or HTML are shown literally.
        assert "Failed" in notes and "1 failed, 3 skipped" in notes
        for item in ("invalid utf8.md", "binary.md", "empty.md", WEIRD):
            assert item in notes, item
        assert "[Show Markdown]" not in notes
        warning = page.locator("[class*='Tag']", has_text="Failed").first
        assert "warning" in (warning.inner_html() or "")  # the warning icon, not an error
        page.locator("text=journal >> visible=true").last.click()
        page.get_by_text("every item is indexed").first.wait_for(timeout=30_000)

        page.goto(ui["url"] + "/assets/raw_files?view=partitions&partition=notes")
        page.get_by_text("source_kind", exact=True).first.wait_for(timeout=60_000)
        partition = page.inner_text("body")
        assert "markdown" in partition and str(ui["root"] / "notes") in partition
        browser.close()


def _wait_for_idle_runs(config: Any, timeout_s: float = 240) -> None:
    """Wait until no run is queued or going (the UI's sensor starts runs of its own)."""
    from dagster import DagsterRunStatus, RunsFilter

    from rag_assets.instance import open_instance

    instance = open_instance(config.data_dir)
    going = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
             DagsterRunStatus.STARTED]  # fmt: skip
    deadline, quiet = time.time() + timeout_s, 0
    while time.time() < deadline:
        quiet = 0 if instance.get_runs(RunsFilter(statuses=going)) else quiet + 1
        if quiet >= 3:
            return
        time.sleep(1)
    pytest.fail(f"runs still going after {timeout_s:.0f} s")


def _row(page: Any, key: str) -> str:
    """The text of the metadata row named ``key`` (its value after the name)."""
    row = page.locator("tr", has=page.get_by_text(key, exact=True)).first
    return " ".join(row.inner_text().split())


def test_problems_standing_a_failed_source_and_its_cause(ui: dict[str, Any]) -> None:
    from playwright.sync_api import sync_playwright

    _wait_for_idle_runs(ui["config"])
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1400, "height": 1000})

        def visit(path: str, wait_for: str) -> str:
            page.goto(ui["url"] + path, wait_until="networkidle")
            skip = page.get_by_role("button", name="Skip")  # the first-visit community dialog
            if skip.count():
                skip.first.click()
            page.get_by_text(wait_for, exact=True).first.wait_for(timeout=60_000)
            page.wait_for_timeout(500)
            return page.inner_text("body")

        # The incremental run parsed no broken file (its own counts are 0), and the
        # partition shows what stands now next to them, as the check does.
        visit("/assets/parsed_documents?view=partitions&partition=notes", "problems_standing")
        assert _row(page, "failed") == "failed 0" and _row(page, "skipped") == "skipped 0"
        assert _row(page, "problems_standing") == "problems_standing 4"
        assert _row(page, "failed_standing") == "failed_standing 1"
        assert _row(page, "skipped_standing") == "skipped_standing 3"
        page.screenshot(path=str(ui["root"] / "standing-notes.png"), full_page=True)

        # A feeds source names its feeds where a folder source shows its path.
        body = visit("/assets/raw_files?view=partitions&partition=news", "source_location")
        assert _row(page, "source_location") == "source_location notafeed.xml, gone.xml"
        assert "source_path" not in body

        # The source whose every item failed is a failed partition (not a green one)...
        body = visit("/assets/fulltext_index?view=partitions", "news")
        assert "Failed (1)" in body, body[:2000]
        page.screenshot(path=str(ui["root"] / "failed-partition.png"), full_page=True)

        # ...and its run's page, which opens on the run's failure, reads the cause first.
        body = visit(f"/runs/{ui['news_run']}", "RUN_FAILURE")
        failure = body[body.rindex("RUN_FAILURE") :][:700]
        assert "nothing is indexed: all 2 of its items failed" in " ".join(failure.split())
        assert "DagsterExecutionStepExecutionError" not in failure
        page.screenshot(path=str(ui["root"] / "failed-run.png"))
        browser.close()


def test_runs_launched_together_never_write_at_the_same_time(ui: dict[str, Any]) -> None:
    from dagster import DagsterRunStatus, RunsFilter

    from rag_assets.instance import open_instance
    from rag_serving.mcp.dagster_client import DagsterClient

    client = DagsterClient(ui["url"])
    try:
        launched = [client.launch(name, full=True) for name in ("notes", "journal", "notes")]
        for run_id in launched:
            assert client.wait(run_id, 300).status == "SUCCESS"
    finally:
        client.close()
    instance = open_instance(ui["config"].data_dir)
    records = [
        r
        for r in instance.get_run_records(filters=RunsFilter(job_name="index_source"))
        if r.dagster_run.tags.get("ragline/launched_by") != "cli"
        and r.dagster_run.status == DagsterRunStatus.SUCCESS
    ]
    assert len(records) >= 3
    spans = sorted((r.start_time, r.end_time) for r in records)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, spans  # the queue started the next run once the last ended
