"""``reindex``: run the indexing job for one source and report its outcome.

With ``ragline ui`` running, the run is launched through its Dagster webserver (it
shows up in the UI and runs on its daemon). Otherwise ``ragline index SOURCE --json``
runs in a subprocess — the same Dagster job in-process, recorded in the project's
instance — so this package never imports ``dagster``. A run still going when the
wait ends is left running; asking again for the same source waits for it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from rag_serving.config import RaglineConfig
from rag_serving.mcp.dagster_client import (
    TERMINAL,
    DagsterClient,
    DagsterUnavailable,
    running_webserver,
)
from rag_sources.errors import RaglineError

# What is read back of `ragline index --json` (its summary) and of its stderr.
MAX_OUTPUT_BYTES = 4 * 1024 * 1024
MAX_ERROR_BYTES = 64 * 1024


@dataclass
class RunOutcome:
    source: str
    via: str  # "dagster" | "in-process"
    run_id: str | None
    status: str
    success: bool | None
    seconds: float
    error: str | None = None
    assets: dict[str, dict[str, Any]] = field(default_factory=dict)
    run_url: str | None = None
    # The source's items that failed / were skipped, counted from the index as
    # `status` counts them (a run's own counts only cover the items it parsed).
    failed_items: int | None = None
    skipped_items: int | None = None

    def summary(self) -> str:
        """One line, like ``ragline index`` prints."""
        if self.success is None:
            return (
                f"{self.source}: the run is still {self.status.lower()} after {self.seconds:.0f}s; "
                "call reindex again to wait for it"
            )
        if not self.success:
            return f"{self.source}: {self.status.lower()}: {self.error or 'no error message'}"
        files = self.assets.get("raw_files", {})
        docs = self.assets.get("parsed_documents", {})
        emb = self.assets.get("embeddings", {})
        failed = docs.get("failed", 0) if self.failed_items is None else self.failed_items
        skipped = docs.get("skipped", 0) if self.skipped_items is None else self.skipped_items
        return (
            f"{self.source}: {files.get('dagster/row_count', 0)} files ({files.get('new', 0)} new, "
            f"{files.get('changed', 0)} changed, {files.get('deleted', 0)} deleted), "
            f"{failed} failed, {skipped} skipped; "
            f"{emb.get('dagster/row_count', 0)} chunks ({emb.get('embedded', 0)} embedded) "
            f"in {self.seconds:.1f}s"
        )


@dataclass
class _Child:
    """A ``ragline index`` subprocess and the files its output goes to."""

    process: subprocess.Popen[bytes]
    stdout: IO[bytes]
    stderr: IO[bytes]
    started: float
    outcome: RunOutcome | None = None


class Reindexer:
    """Launches runs; remembers in-process runs still going, one per source."""

    def __init__(self, config: RaglineConfig):
        self.config = config
        self._lock = threading.Lock()
        self._children: dict[str, _Child] = {}
        self._dagster_runs: dict[str, tuple[str, str]] = {}  # source → (webserver URL, run id)

    def run(self, source: str, full: bool, wait_s: float) -> RunOutcome:
        """Run ``source`` through Dagster when ``ragline ui`` runs, else in-process.

        A run of ``source`` that an earlier call left going is waited for instead of
        starting another one. A finished run's failed and skipped items are the
        source's, counted as `status` counts them.
        """
        outcome = self._run(source, full, wait_s)
        if outcome.success is not None:
            failed, skipped = _item_problems(self.config, source)
            outcome.failed_items, outcome.skipped_items = failed, skipped
        return outcome

    def _run(self, source: str, full: bool, wait_s: float) -> RunOutcome:
        with self._lock:
            pending = self._dagster_runs.get(source)
        if pending is not None:
            return self._wait_dagster(*pending, source=source, wait_s=wait_s)
        if source not in self._children:
            launched = self._launch_dagster(source, full)
            if launched is not None:
                return self._wait_dagster(*launched, source=source, wait_s=wait_s)
        return self._in_process(source, full, wait_s)

    def _launch_dagster(self, source: str, full: bool) -> tuple[str, str] | None:
        """Queue a run on the running ``ragline ui``: (its URL, the run id), or None
        when there is none (or its marker is stale and nothing answers)."""
        url = running_webserver(self.config)
        if url is None:
            return None
        client = DagsterClient(url)
        try:
            run_id = client.launch(source, full)
        except DagsterUnavailable:
            return None
        finally:
            client.close()
        with self._lock:
            self._dagster_runs[source] = (url, run_id)
        return url, run_id

    def _wait_dagster(self, url: str, run_id: str, *, source: str, wait_s: float) -> RunOutcome:
        client = DagsterClient(url)
        try:
            result = client.wait(run_id, wait_s)
        except DagsterUnavailable as exc:
            with self._lock:
                self._dagster_runs.pop(source, None)
            raise RaglineError(
                f"lost the Dagster webserver while run {run_id} of {source!r} was going ({exc}); "
                "see the run in the Dagster UI or `ragline status`"
            ) from exc
        finally:
            client.close()
        done = result.status in TERMINAL
        if done:
            with self._lock:
                self._dagster_runs.pop(source, None)
        return RunOutcome(
            source=source,
            via="dagster",
            run_id=run_id,
            status=result.status,
            success=(result.status == "SUCCESS") if done else None,
            seconds=result.seconds,
            error=result.error,
            assets=result.assets,
            run_url=f"{url}/runs/{run_id}",
        )

    def _in_process(self, source: str, full: bool, wait_s: float) -> RunOutcome:
        with self._lock:
            child = self._children.get(source)
            if child is None:
                child = self._start(source, full)
                self._children[source] = child
        try:
            child.process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return RunOutcome(
                source, "in-process", None, "STARTED", None, time.monotonic() - child.started
            )
        with self._lock:
            if self._children.get(source) is child:
                del self._children[source]
            if child.outcome is None:
                child.outcome = _read_outcome(source, child)
            return child.outcome

    def _start(self, source: str, full: bool) -> _Child:
        if self.config.config_path is None:
            raise RaglineError("the server's config was not loaded from a file; cannot reindex")
        command = [
            sys.executable, "-m", "ragline.cli", "--config", str(self.config.config_path),
            "index", source, "--json",
        ]  # fmt: skip
        if full:
            command.append("--full")
        # Closed by _read_outcome once the run has ended (the run outlives this call).
        stdout = tempfile.TemporaryFile()  # noqa: SIM115
        stderr = tempfile.TemporaryFile()  # noqa: SIM115
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=Path.cwd()
        )
        return _Child(process, stdout, stderr, time.monotonic())


def _item_problems(config: RaglineConfig, source: str) -> tuple[int, int]:
    """(failed, skipped) items of ``source`` in the index, as `status` reports them."""
    from rag_serving.status import index_status

    state = next(
        (s for s in index_status(config, check_pending=False).sources if s.name == source), None
    )
    return (state.count("error"), state.count("skipped")) if state else (0, 0)


def _read_outcome(source: str, child: _Child) -> RunOutcome:
    """Parse ``ragline index --json`` output (one entry per source)."""
    seconds = time.monotonic() - child.started
    child.stdout.seek(0)
    child.stderr.seek(0)
    # Bounded: one source's summary is a few kB; its errors' last lines are what counts.
    raw = child.stdout.read(MAX_OUTPUT_BYTES + 1)
    out = raw.decode("utf-8", "replace")
    child.stderr.seek(max(0, child.stderr.seek(0, 2) - MAX_ERROR_BYTES))
    err = child.stderr.read(MAX_ERROR_BYTES).decode("utf-8", "replace")
    child.stdout.close()
    child.stderr.close()
    try:
        if len(raw) > MAX_OUTPUT_BYTES:
            raise ValueError("too long to be one source's summary")
        entries = json.loads(out)
        entry = next(e for e in entries if e.get("source") == source)
    except (ValueError, StopIteration, AttributeError, RecursionError):
        lines = [line for line in err.strip().splitlines() if line.strip()]
        message = lines[-1].removeprefix("error: ") if lines else "no output"
        return RunOutcome(
            source, "in-process", None, "FAILURE", False, round(seconds, 2),
            error=f"`ragline index {source}` exited with code {child.process.returncode}: {message}",
        )  # fmt: skip
    success = bool(entry.get("success"))
    assets = {
        asset: {k: v for k, v in values.items() if isinstance(v, int | float | bool)}
        for asset, values in (entry.get("assets") or {}).items()
    }
    return RunOutcome(
        source=source,
        via="in-process",
        run_id=entry.get("run_id"),
        status="SUCCESS" if success else "FAILURE",
        success=success,
        seconds=float(entry.get("seconds") or seconds),
        error=entry.get("error"),
        assets=assets,
    )
