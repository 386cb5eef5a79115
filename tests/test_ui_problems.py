"""What a user sees in the Dagster UI (Debian's chromium driven by Playwright, the UI
started by `ragline ui`): a broken file stays visible on its source's partition
after a later incremental run of another file (the items_indexed check, as a
warning, with the file listed), and runs queued in the UI never write at the same
time (the writer pool admits one run at a time)."""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rag_serving.config import parse_config_file
from tests.test_problems_visible import WEIRD, write_problem_sources
from tests.test_ui import CHROMIUM, CHROMIUM_ARGS
from tests.ui_process import running_ragline_ui


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory, sample_vault: Path) -> Iterator[dict[str, Any]]:
    """notes (with broken files) and journal indexed, then another note of notes
    edited and notes re-indexed (incrementally); then `ragline ui`."""
    from ragline.indexing import index_sources

    root = tmp_path_factory.mktemp("ui-problems")
    config_path = write_problem_sources(root, sample_vault)
    notes = root / "notes"
    config = parse_config_file(config_path)
    assert all(o.success for o in index_sources(config, [], full=False))
    edited = notes / "Kubernetes.md"
    edited.write_text(edited.read_text() + "\nA later edit.\n")
    [incremental] = index_sources(config, ["notes"], full=False)
    assert incremental.success and incremental.metadata["parsed_documents"]["failed"] == 0

    with running_ragline_ui(config_path, root, stdout=subprocess.DEVNULL) as url:
        yield {"url": url, "config": config, "root": root}


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
