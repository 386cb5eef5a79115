"""``ragline index``: run the indexing job per source and report it where users look.

Progress (``--progress``): a bar on a terminal; plain lines on stderr otherwise (a
run redirected to a file is never silent); or NDJSON events on stdout for programs
that drive the indexer (``{"type": "progress" | "problem" | "source" | "complete"}``).
Exit codes: 0 every run succeeded (items may have failed: the output says how
many), 1 a run failed (its source indexes nothing: every item failed, or a step
failed), 2 nothing could run (the config, a source's folder, the index). With
``--progress ndjson``, the contract of indexer subprocesses: 1 is any partial
failure, also a successful run of a source where items stand failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_serving.config import RaglineConfig
from ragline.indexing import SourceRunOutcome
from ragline.output import console, err_console, outcome_line, print_json

STAGES = {"scan": "scanning", "parse": "parsing", "chunk": "chunking", "embed": "embedding",
          "fulltext": "full-text", "ocr": "OCR"}  # fmt: skip
# The phase names of NDJSON progress events (stable: programs match on them).
PHASES = {"scan": "scanning", "parse": "parsing", "chunk": "chunking", "embed": "embedding",
          "fulltext": "fulltext", "ocr": "ocr"}  # fmt: skip
PROGRESS_MODES = ("auto", "bar", "plain", "ndjson", "none")
PLAIN_INTERVAL_S = 10.0  # a plain progress line per running stage at most this often...
PLAIN_FIRST_S = 1.0  # ...the first once a stage has run this long (quick ones: one line)
NDJSON_INTERVAL_S = 0.25  # progress events per (source, phase) at most this often
MAX_ERRORS = 1000  # failed items listed in the final NDJSON event


def run_index(
    config: RaglineConfig, sources: list[str], full: bool, as_json: bool, progress: str = "auto"
) -> int:
    """Index and report; the exit code (0: every run succeeded, 1: a run failed)."""
    from ragline.indexing import index_sources

    mode = _mode(progress, as_json)
    started = time.perf_counter()
    if mode in ("plain", "bar"):
        from rag_serving.status import embedding_device

        if device := embedding_device(config):
            _stderr_line(f"embedding documents on {device}")
    if mode == "ndjson":
        with _events_out() as out:
            events = NdjsonEvents(out)
            outcomes = index_sources(
                config, sources, full, events.progress, events.problem, events.outcome
            )
            events.complete(config, outcomes, time.perf_counter() - started)
        return 0 if all(outcome_kind(o) == "success" for o in outcomes) else 1
    if mode == "plain":
        with PlainProgress(_stderr_line) as plain:
            outcomes = index_sources(config, sources, full, plain.update, None, _print_outcome)
        return _exit_code(outcomes)
    if mode == "none":
        outcomes = index_sources(
            config, sources, full, None, None, None if as_json else _print_outcome
        )
    else:
        with _bar() as on_progress:
            outcomes = index_sources(config, sources, full, on_progress, None, _print_outcome)
    if as_json:
        print_json([outcome_json(o) for o in outcomes])
    return _exit_code(outcomes)


def _mode(progress: str, as_json: bool) -> str:
    if progress != "auto":
        return progress
    if as_json:
        return "none"  # stdout is the JSON document; stderr stays for errors
    return "bar" if err_console.is_terminal else "plain"


def _exit_code(outcomes: list[SourceRunOutcome]) -> int:
    return 0 if all(o.success for o in outcomes) else 1


def outcome_kind(o: SourceRunOutcome) -> str:
    """``success``, ``partial`` (the run succeeded; some items stand failed) or
    ``failed`` (the run failed: a step failed, or no item of the source is indexed
    because they failed)."""
    if not o.success:
        return "failed"
    problems = o.problems
    return "partial" if problems is not None and problems.failed else "success"


def outcome_json(o: SourceRunOutcome) -> dict[str, Any]:
    """One run as ``--json`` and the NDJSON ``source`` event show it."""
    problems = o.problems
    return {
        "source": o.source,
        "run_id": o.run_id,
        "pass": "deferred" if o.deferred_pass else "first",
        "success": o.success,
        "outcome": outcome_kind(o),
        "seconds": round(o.seconds, 2),
        "error": o.error,
        "items": o.items,
        "indexed": o.indexed,
        "chunks": o.chunks,
        "problems": problems.as_json() if problems is not None else None,
        "assets": o.metadata,
    }


def _print_outcome(o: SourceRunOutcome) -> None:
    line = outcome_line(o)
    if o.success:
        console.print(line)
    else:
        err_console.print(line)


# ---- bar (a terminal) ---------------------------------------------------------


@contextlib.contextmanager
def _bar() -> Iterator[Callable[[str, str, int, int], None]]:
    progress = Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    tasks: dict[tuple[str, str], Any] = {}

    def on_progress(source: str, stage: str, done: int, total: int) -> None:
        key = (source, stage)
        if key not in tasks:
            label = f"{source}: {STAGES.get(stage, stage)}"
            tasks[key] = progress.add_task(label, total=total or None)
        progress.update(tasks[key], completed=done, total=total or None)

    with progress:
        yield on_progress


# ---- plain lines (not a terminal) ----------------------------------------------


def _stderr_line(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@dataclass
class _Stage:
    source: str
    stage: str
    started: float
    done: int = 0
    total: int = 0
    last_line: float | None = None  # when its last line was written


class PlainProgress:
    """Progress as plain lines (a log file, a service manager's journal): once a stage
    has run ``first_s``, a line, then one every ``interval_s`` while it runs, news or
    not (a feed fetch or one large PDF is not silent), and one when it ends. A stage
    that ends sooner writes nothing: the run's summary line says what it did."""

    def __init__(
        self,
        write: Callable[[str], None],
        interval_s: float = PLAIN_INTERVAL_S,
        first_s: float = PLAIN_FIRST_S,
        clock: Callable[[], float] = time.monotonic,
        tick_s: float = 1.0,
    ):
        self.write = write
        self.interval_s = interval_s
        self.first_s = first_s
        self.clock = clock
        self.tick_s = tick_s
        self._current: _Stage | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PlainProgress:
        self._thread = threading.Thread(target=self._beat, name="ragline-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            self._end()

    def update(self, source: str, stage: str, done: int, total: int) -> None:
        """A report of the running stage (``rag_assets.progress``)."""
        now = self.clock()
        with self._lock:
            current = self._current
            if current is None or (current.source, current.stage) != (source, stage):
                self._end()
                current = self._current = _Stage(source, stage, now)
            current.done, current.total = done, total
            if total and done >= total:
                self._end()
            else:
                self._write_if_due(now)

    def beat(self) -> None:
        """Write the running stage's line if one is due (every ``tick_s``)."""
        with self._lock:
            self._write_if_due(self.clock())

    def _beat(self) -> None:
        while not self._stop.wait(self.tick_s):
            self.beat()

    def _write_if_due(self, now: float) -> None:
        stage = self._current
        if stage is None:
            return
        if stage.last_line is None:
            due = stage.started + self.first_s
        else:
            due = stage.last_line + self.interval_s
        if now >= due:
            self.write(self._line(stage, now))
            stage.last_line = now

    def _end(self) -> None:
        stage, self._current = self._current, None
        if stage is not None and stage.last_line is not None:
            self.write(self._line(stage, self.clock(), ended=True))

    @staticmethod
    def _line(stage: _Stage, now: float, ended: bool = False) -> str:
        label = f"{stage.source}: {STAGES.get(stage.stage, stage.stage)}"
        took = _duration(now - stage.started)
        if ended:
            counts = f" {stage.done}/{stage.total}" if stage.total else ""
            return f"{label}{counts} done in {took}"
        if not stage.total:
            return f"{label}… ({took})"
        return f"{label} {stage.done}/{stage.total} ({100 * stage.done // stage.total}%), {took}"


# ---- NDJSON events (a program drives the indexer) -------------------------------


@contextlib.contextmanager
def _events_out() -> Iterator[IO[str]]:
    """The stream the events go to: stdout, kept for them alone. Anything else that
    would write to stdout while the runs go (a library's print, a native library
    writing to file descriptor 1) goes to stderr instead."""
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None  # not a real file (a test runner's capture): Python-level only
    if fd is None:
        out = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            yield out
        return
    saved = os.dup(fd)
    out = os.fdopen(os.dup(fd), "w", encoding="utf-8", buffering=1)
    os.dup2(sys.stderr.fileno(), fd)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield out
    finally:
        out.flush()
        out.close()
        sys.stdout.flush()
        os.dup2(saved, fd)
        os.close(saved)


class NdjsonEvents:
    """One JSON object per line: ``progress`` (source, phase, current, total; a total
    of 0 until the stage knows it), ``problem`` (each problem a run finds), ``source``
    (each run as it ends) and, last, ``complete``."""

    def __init__(self, out: IO[str], clock: Callable[[], float] = time.monotonic):
        self.out = out
        self.clock = clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def emit(self, event: dict[str, Any]) -> None:
        with self._lock:
            self.out.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
            self.out.flush()

    def progress(self, source: str, stage: str, done: int, total: int) -> None:
        key, now = (source, stage), self.clock()
        last = self._last.get(key)
        ended = bool(total) and done >= total
        if last is not None and not ended and now - last[0] < NDJSON_INTERVAL_S:
            return
        if last is not None and last[1] == done and not ended:
            return
        self._last[key] = (now, done)
        phase = PHASES.get(stage, stage)
        self.emit(
            {"type": "progress", "source": source, "phase": phase, "current": done, "total": total}
        )

    def problem(self, source: str, path: str, severity: str, message: str) -> None:
        self.emit(
            {"type": "problem", "source": source, "path": path, "severity": severity,
             "message": message}
        )  # fmt: skip

    def outcome(self, o: SourceRunOutcome) -> None:
        event = {"type": "source", **outcome_json(o)}
        event.pop("assets")
        event["duration_ms"] = int(o.seconds * 1000)
        event.pop("seconds")
        self.emit(event)
        if not o.success:
            err_console.print(outcome_line(o))  # errors on stderr

    def complete(
        self, config: RaglineConfig, outcomes: list[SourceRunOutcome], seconds: float
    ) -> None:
        """The last event: what the index holds for the sources now, and every error
        (failed runs, then items that stand failed)."""
        from rag_serving.status import index_status

        names = list(dict.fromkeys(o.source for o in outcomes))
        states = {
            s.name: s for s in index_status(config, check_pending=False).sources if s.name in names
        }
        errors: list[dict[str, Any]] = []
        last = {o.source: o for o in outcomes}
        for name in names:
            o = last[name]
            if not o.success:
                errors.append({"source": name, "path": None, "message": o.error or "the run failed",
                               "run_id": o.run_id})  # fmt: skip
        items = [
            {"source": name, "path": issue.path, "message": issue.message}
            for name in names
            if name in states
            for issue in states[name].issues
            if issue.severity == "error"
        ]
        total = len(errors) + len(items)
        errors.extend(items[: max(0, MAX_ERRORS - len(errors))])
        self.emit(
            {
                "type": "complete",
                "indexed_files": sum(s.documents for s in states.values()),
                "total_chunks": sum(s.chunks for s in states.values()),
                "duration_ms": int(seconds * 1000),
                "sources": len(names),
                "failed_sources": [n for n in names if not last[n].success],
                "errors": errors,
                "errors_total": total,
            }
        )
