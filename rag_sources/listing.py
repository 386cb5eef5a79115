"""An item of a source as its kind's listing sees it, before anything is read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rag_sources.config import FileSourceConfig


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


def list_source_items(config: FileSourceConfig, state_dir: Path | None) -> Iterator[ListedItem]:
    """The items of a source whose kind lists them itself (``listed_items``); a
    folder of files is listed by the walker instead (``rag_sources.scanning``)."""
    items = config.listed_items(state_dir)
    if items is None:
        raise ValueError(f"source {config.name!r} is a folder: the walker lists it")
    return items
