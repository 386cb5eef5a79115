"""Progress of the running stage, reported to whoever listens in this process
(the CLI's progress bar). Dagster runs in-process, so a callback is enough."""

from __future__ import annotations

from collections.abc import Callable

Reporter = Callable[[str, str, int, int], None]  # source, stage, done, total
_reporter: Reporter | None = None


def set_reporter(reporter: Reporter | None) -> None:
    """Install (or remove, with None) the progress callback."""
    global _reporter
    _reporter = reporter


def report(source: str, stage: str, done: int, total: int) -> None:
    """Tell the listener that ``done`` of ``total`` units of ``stage`` are finished."""
    if _reporter is not None:
        _reporter(source, stage, done, total)
