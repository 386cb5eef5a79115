"""An item of a source as its kind's listing sees it, before anything is read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ListedItem:
    """One item of a source as its listing sees it (the fields of ``ItemStat``)."""

    key: str
    fingerprint: str
    size: int | None = None
    mtime_ns: int | None = None
    problem: str | None = None
    severity: str = "skipped"
    unavailable: bool = False
