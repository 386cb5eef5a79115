"""The Dagster UI as a user sees it: Debian's chromium driven by Playwright opens
the UI started by `ragline ui`, finds the asset graph and the source partitions,
launches a materialisation of one partition and sees it succeed."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import write_config
from tests.ui_process import running_ragline_ui

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]  # fmt: skip


@pytest.fixture()
def running_ui(tmp_path: Path, sample_vault: Path) -> Iterator[tuple[str, Path]]:
    vault = tmp_path / "journal"
    shutil.copytree(sample_vault / "journal", vault)
    config_path = write_config(
        tmp_path, [{"name": "journal", "kind": "markdown", "path": str(vault)}]
    )
    with running_ragline_ui(config_path, tmp_path, stop_timeout_s=20) as url:
        yield url, tmp_path / "data" / "dagster"


def test_ui_shows_assets_partitions_and_runs_a_partition(
    running_ui: tuple[str, Path], tmp_path: Path
) -> None:
    from dagster import DagsterInstance, DagsterRunStatus
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    url, dagster_home = running_ui
    assert Path(CHROMIUM).exists(), "install Debian's chromium (scripts/setup.sh --dev does)"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})

        def visit(path: str) -> None:
            page.goto(url + path, wait_until="networkidle")
            page.wait_for_timeout(1500)
            skip = page.get_by_role("button", name="Skip")  # the first-visit community dialog
            if skip.count():
                skip.first.click()

        def shown(text: str) -> bool:
            """Whether ``text`` appears within 60 s (the graph renders late on a busy machine)."""
            try:
                page.get_by_text(text, exact=True).first.wait_for(timeout=60_000)
            except PlaywrightTimeout:
                return False
            return True

        visit("/asset-groups")
        for name in ("raw_files", "parsed_documents", "chunks", "embeddings", "fulltext_index"):
            assert shown(name), name

        visit("/assets/raw_files?view=partitions")
        assert shown("journal")

        visit("/asset-groups")
        page.get_by_text("Materialize all").first.click()
        page.get_by_text("Select a partition or create one").click()
        page.locator(".dagster-popover").get_by_text("journal", exact=True).first.click()
        page.keyboard.press("Escape")
        page.get_by_role("button", name="Launch 1 run").click()

        instance = DagsterInstance.from_config(str(dagster_home))
        deadline = time.time() + 180
        manual = []
        while time.time() < deadline:
            runs = instance.get_runs()
            manual = [r for r in runs if "ragline/launched_by" not in r.tags]
            if manual and manual[0].status in (DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE):
                break
            time.sleep(2)
        assert manual, "no run was launched from the UI"
        assert manual[0].status == DagsterRunStatus.SUCCESS
        assert manual[0].tags.get("dagster/partition") == "journal"

        visit("/runs")
        assert page.get_by_text("Success").count() >= 1
        visit("/assets/embeddings")
        body = page.inner_text("body")
        for label in ("unchanged", "embedded", "vectors_reused"):
            assert label in body, label
        screenshot = tmp_path / "dagster-ui.png"
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    assert screenshot.stat().st_size > 10_000
