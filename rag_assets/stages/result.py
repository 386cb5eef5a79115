"""What a stage did, as counts and per-file problems."""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import Any


@dataclass(frozen=True)
class FileProblem:
    path: str
    severity: str  # error | skipped | warning
    message: str


@dataclass
class StageResult:
    """Counts of one stage run for one source."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0
    rebuilt: int = 0  # redone only because of a full rebuild or backfill: same input
    deleted: int = 0
    failed: int = 0
    skipped: int = 0
    row_count: int = 0
    problems: list[FileProblem] = field(default_factory=list)
    extra: dict[str, int | float | str] = field(default_factory=dict)
    # The doc ids a changed-set scan touched (the later stages do only their work);
    # None: the whole source.
    scope: list[str] | None = None

    def counts(self) -> dict[str, int]:
        return {
            "new": self.new,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "rebuilt": self.rebuilt,
            "deleted": self.deleted,
            "failed": self.failed,
            "skipped": self.skipped,
        }


def utcnow() -> datetime:
    return datetime.now(UTC)


def return_freed_memory() -> None:
    """Give the memory a stage freed back to the system (glibc only; elsewhere nothing).

    glibc keeps freed blocks in its heaps: after one 20 MB note was parsed or chunked,
    the process kept ~250 MiB it no longer used into the stages after it.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@cache
def _malloc_trim() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
