"""Generators of hostile inputs for ``benchmarks/hostile_inputs.py``, one module per
area (``documents``, ``mail``, ``feeds``, ``pipeline``), each with a ``CASES`` list.

A case writes one full-size hostile input (the sizes of issue 26: a 30,000 × 30,000
PNG, a 1 MB DOCX unpacking to gigabytes…) beside a few good items into the folder
it is given, and returns the source to index it as (a ragline.toml source table
without ``name``). ``hostile_inputs.py`` indexes each case in a fresh process and
records its peak RSS, its wall time, what was recorded for the hostile item and
whether the good items were indexed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class HttpFixture(Protocol):
    """The runner's HTTP server on 127.0.0.1 (for feeds): raw answers per path."""

    def route(
        self,
        path: str,
        body: bytes,
        headers: dict[str, str] | None = None,
        status: int = 200,
        raw: bytes | None = None,  # the whole response as sent (lying headers)
    ) -> str:
        """Serve ``body`` at ``path``; returns its URL."""
        ...


@dataclass(frozen=True)
class HostileCase:
    name: str  # what it is, as in the issue ("PNG 30000×30000, 109 kB")
    item: int  # the issue 26 item it checks
    # Writes the input (and a few good items) under the folder; returns the source.
    build: Callable[[Path, HttpFixture], dict[str, Any]]
    # Words expected in the recorded problem or warning of the hostile item ("": it
    # is indexed within the caps, nothing need be recorded).
    expect: str
    # How many good items (documents) the source must still index.
    good_items: int = 1
    # For an input that is big content once its defect is fixed (20,000 messages
    # sharing one Message-ID): the same input without the hostile feature. The
    # case then holds within 1.25 × the twin's time when that is over 60 s.
    twin: Callable[[Path, HttpFixture], dict[str, Any]] | None = None
