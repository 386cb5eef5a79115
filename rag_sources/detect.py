"""What `ragline init` and `sources add` make of a folder, a file or a URL: each kind
says what it recognises (``FileSourceConfig.detect_*``), and a bounded census of
the folder's files — by the kind that claims them — settles the rest.

Detection reads folder listings only (names and entry types, no file is opened),
within a budget, so that `ragline init ~` answers at once on a huge home folder.
"""

from __future__ import annotations

import os
import time
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rag_sources.config import kind_name

if TYPE_CHECKING:
    from rag_sources.config import FileSourceConfig

DETECT_MAX_ENTRIES = 20_000  # directory entries read
DETECT_MAX_DEPTH = 8  # folder levels below the folder given
DETECT_MAX_SECONDS = 2.0  # a slow network drive


@dataclass(frozen=True)
class FolderUnit:
    """A folder a kind takes whole (a Maildir): its files, and the subfolders the
    census must not walk into."""

    files: int
    entries: int  # directory entries read to count them
    skip: frozenset[str]


@dataclass
class Census:
    """What a bounded walk of a folder found."""

    files: int = 0  # every file seen, those of no known type too
    claimed: Counter[str] = field(default_factory=Counter)  # files by the kind claiming them
    other: int = 0  # files of some type no kind claims (they have a suffix)
    units: dict[str, list[str]] = field(default_factory=dict)  # kind -> folders it takes whole
    entries: int = 0  # directory entries read
    out_of_budget: bool = False  # entries or time ran out
    too_deep: bool = False  # a folder below max_depth was left out
    max_depth: int = DETECT_MAX_DEPTH
    notes: list[str] = field(default_factory=list)  # what kinds that did not win add

    @property
    def counted(self) -> int:
        """Files of a known type, claimed or not."""
        return sum(self.claimed.values()) + self.other

    def cut_note(self) -> str:
        notes = []
        if self.out_of_budget:
            notes.append(f"stopped looking after {self.entries:,} entries")
        if self.too_deep:
            notes.append(f"folders deeper than {self.max_depth} levels not looked at")
        return "; ".join(notes)


def detect_kind(
    folder: Path,
    kinds: Sequence[type[FileSourceConfig]],
    max_entries: int = DETECT_MAX_ENTRIES,
    max_depth: int = DETECT_MAX_DEPTH,
    max_seconds: float = DETECT_MAX_SECONDS,
) -> tuple[str, str]:
    """The kind for ``folder`` and why: the first kind (in ``DETECT_ORDER``) that
    recognises a marker (``.git``, ``metadata.db``), else the first that the census
    of its files convinces; the tree is looked at breadth first, by folder listings
    only, within ``max_entries`` entries, ``max_depth`` levels and ``max_seconds``."""
    ordered = sorted(kinds, key=lambda kind: kind.DETECT_ORDER)
    for kind in ordered:
        reason = kind.detect_marker(folder)
        if reason is not None:
            return kind_of(kind), reason
    census = take_census(folder, ordered, max_entries, max_depth, max_seconds)
    for kind in ordered:
        reason = kind.detect_census(census)
        if reason is not None:
            return kind_of(kind), reason
    raise ValueError("no source kind takes a folder whatever it holds")  # a kind's fallback does


def detect_target(
    target: str, path: Path | None, kinds: Sequence[type[FileSourceConfig]]
) -> tuple[str, str] | None:
    """The kind that recognises a URL (``path`` None) or a file, and why; None: none."""
    head = b""
    if path is not None:
        with path.open("rb") as handle:
            head = handle.read(16)
    for kind in sorted(kinds, key=lambda kind: kind.DETECT_ORDER):
        reason = kind.detect_url(target) if path is None else kind.detect_file(path, head)
        if reason is not None:
            return kind_of(kind), reason
    return None


def kind_of(model: type[FileSourceConfig]) -> str:
    return kind_name(model)


def take_census(
    folder: Path,
    kinds: Sequence[type[FileSourceConfig]],
    max_entries: int = DETECT_MAX_ENTRIES,
    max_depth: int = DETECT_MAX_DEPTH,
    max_seconds: float = DETECT_MAX_SECONDS,
) -> Census:
    """Count the files under ``folder`` by the kind that claims them and find the
    folders kinds take whole, breadth first (the top levels, where a user's folders
    are, before the depths)."""
    census = Census(max_depth=max_depth)
    deadline = time.monotonic() + max_seconds
    queue: deque[tuple[Path, str, int]] = deque([(folder, "", 0)])
    while queue:
        path, rel, depth = queue.popleft()
        listing = listed(path, max(1, max_entries - census.entries))
        census.entries += len(listing)
        subfolders = {name for name, is_dir in listing if is_dir}
        skip: frozenset[str] = frozenset()
        for kind in kinds:
            budget = max(1, max_entries - census.entries)
            unit = kind.claim_folder(path, subfolders, budget)
            if unit is not None:
                name = kind_of(kind)
                census.units.setdefault(name, []).append(rel or ".")
                census.files += unit.files
                census.claimed[name] += unit.files
                census.entries += unit.entries
                skip = unit.skip
                break
        for name, is_dir in listing:
            if is_dir:
                if name in skip:
                    continue
                # Dot folders are a program's own (.git, .cache), unless a kind reads them.
                if name.startswith(".") and not any(k.enters(path / name) for k in kinds):
                    continue
                if depth >= max_depth:
                    census.too_deep = True
                    continue
                queue.append((path / name, f"{rel}/{name}" if rel else name, depth + 1))
            elif not name.startswith("."):
                census.files += 1
                claimant = next((k for k in kinds if k.claims_file(name)), None)
                if claimant is not None:
                    census.claimed[kind_of(claimant)] += 1
                elif "." in name:  # no suffix (README, a notmuch message): no known type
                    census.other += 1
        if census.entries >= max_entries or time.monotonic() > deadline:
            census.out_of_budget = True
            break
    return census


def listed(path: Path, limit: int | None = None) -> list[tuple[str, bool]]:
    """(name, is a folder) of the entries of ``path`` (the first ``limit`` read: a
    Maildir's cur/ can hold a million), sorted; links are not folders (never
    followed); [] when it cannot be read."""
    found: list[tuple[str, bool]] = []
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                found.append((entry.name, _is_folder(entry)))
                if limit is not None and len(found) >= limit:
                    break
    except OSError:
        return found
    return sorted(found)


def _is_folder(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def subfolders(folder: Path) -> set[str]:
    return {name for name, is_dir in listed(folder) if is_dir}


def and_list(items: Iterable[str]) -> str:
    """ "a", "a and b", "a, b and c"."""
    words = list(items)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
