"""Progress of the running stage, and the problems a run finds, reported to whoever
listens in this process (``ragline index``: its progress bar, plain lines or NDJSON
events). Dagster runs in-process, so callbacks are enough."""

from __future__ import annotations

from collections.abc import Callable, Iterable

Reporter = Callable[[str, str, int, int], None]  # source, stage, done, total
ProblemReporter = Callable[[str, str, str, str], None]  # source, item, severity, reason
_reporter: Reporter | None = None
_problem_reporter: ProblemReporter | None = None


def set_reporter(reporter: Reporter | None) -> None:
    """Install (or remove, with None) the progress callback."""
    global _reporter
    _reporter = reporter


def set_problem_reporter(reporter: ProblemReporter | None) -> None:
    """Install (or remove, with None) the callback told of each problem a run finds."""
    global _problem_reporter
    _problem_reporter = reporter


def report(source: str, stage: str, done: int, total: int) -> None:
    """Tell the listener that ``done`` of ``total`` units of ``stage`` are finished."""
    if _reporter is not None:
        _reporter(source, stage, done, total)


def report_start(source: str, stage: str) -> None:
    """Tell the listener that ``stage`` began, its total not known yet (0 of 0): a
    stage that lists or fetches for minutes before its first count is not silent."""
    report(source, stage, 0, 0)


def report_problems(source: str, problems: Iterable[tuple[str, str, str]]) -> None:
    """Tell the listener of the (item, severity, reason) problems a stage found."""
    if _problem_reporter is None:
        return
    for path, severity, message in problems:
        _problem_reporter(source, path, severity, message)
