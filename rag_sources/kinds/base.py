"""The source-kind interface: what a kind provides, and nothing the stages branch on.

A kind is one folder (``rag_sources/kinds/<kind>/``, or a package of its own) with a
``SourceKind`` subclass, found through ``rag_sources/kinds/__init__.py``. Its
capabilities are separate, as in Onyx's connectors:

- **list** (``list_items``): every item of the source with a stable key and a cheap
  change fingerprint — stat only for files; the sensor calls it every tick;
- **load** (``content_hash`` and ``parse``): an item's content hash, and the item
  parsed into a ``ParsedDocument`` of anchored sections;
- **chunk** (``chunk``): the chunker that fits the kind's documents.

An item is anything with a key unique in its source: a file (key = its relative
path), a message inside an mbox (``Inbox.mbox/<message-id>``), a feed entry
(its guid), a git blob or commit. ``path`` is where a person finds it; for a file it
is the key itself.

Listing never fails on one item: an item that cannot be indexed is listed with a
``problem`` (a one-line reason) that the stages record in ``file_issues``. An item
that exists but cannot be read now is ``unavailable``: what the index holds for it
is kept, and when its key ends with ``/`` (a folder, a mailbox, any group of keys)
so is everything under that prefix. A source that cannot be listed at all raises
``SourceUnavailableError``: its run fails and nothing is pruned.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from rag_sources.chunking import Chunk, CountTokens
from rag_sources.config import FileSourceConfig
from rag_sources.formats.model import ParsedDocument, ParseOptions, options_for


@dataclass(frozen=True)
class ItemStat:
    """One item as listing sees it, without reading its content."""

    key: str  # unique and stable within the source (a relative path for files)
    fingerprint: str  # equal means unchanged: the content is not read again
    size: int | None = None
    mtime_ns: int | None = None  # for files: lets search flag a hit whose file changed
    problem: str | None = None  # why the item cannot be indexed, on one line
    severity: str = "skipped"  # of the problem: "skipped" (by rule) or "error"
    # Exists but cannot be read now: keep what the index holds for it (and, for a key
    # ending with "/", for every key under it) until it can be read again.
    unavailable: bool = False

    @property
    def modified(self) -> datetime | None:
        from datetime import UTC

        return None if self.mtime_ns is None else datetime.fromtimestamp(self.mtime_ns / 1e9, UTC)


@dataclass(frozen=True)
class ChangedItems:
    """The listing of the items at some changed paths (``SourceKind.list_changed``)."""

    items: list[ItemStat]  # what ``list_items`` lists at and under those paths
    # The keys it speaks for (a key, or a prefix ending with "/" for every key under
    # it): an indexed item at a covered key that ``items`` lacks is gone.
    covered: tuple[str, ...]

    def covers(self, key: str) -> bool:
        prefixes = tuple(k for k in self.covered if k.endswith("/"))
        return key in self.covered or key.startswith(prefixes)


@dataclass(frozen=True)
class DocumentView:
    """What a chunker reads of a stored document."""

    key: str
    body: str
    body_start_line: int
    sections: list[Any]  # formats.model.Section
    file_type: str | None
    title: str = ""  # leads each chunk's embedded context line ('' for none)


class SourceKind(ABC):
    """One kind of source. Subclasses set ``name`` and ``config_type``."""

    name: ClassVar[str]
    config_type: ClassVar[type[FileSourceConfig]]

    # The run was asked for by a person or is a full rebuild (not a sensor's): a kind
    # that polls on a schedule (feeds) checks every item now, not only the due ones.
    on_demand: bool = False

    def __init__(self, config: FileSourceConfig, state_dir: Path | None = None):
        self.config = config
        self._state_dir = state_dir

    @property
    def location(self) -> str:
        """Where the source is, for messages: its folder (a feeds source: its feeds)."""
        return str(self.config.path)

    @property
    def state_dir(self) -> Path:
        """A folder of the kind's own for this source (a mailbox's message offsets, a
        feed's fetched entries and HTTP validators), under the index's data_dir:
        ``<data_dir>/sources/<name>/``. Everything in it can be rebuilt from the
        source, except what a source no longer holds (entries gone from a feed)."""
        if self._state_dir is None:
            raise RuntimeError(f"source {self.config.name!r}: no state folder was given")
        self._state_dir.mkdir(parents=True, exist_ok=True)
        return self._state_dir

    # ---- list ----------------------------------------------------------------

    @abstractmethod
    def list_items(self) -> Iterator[ItemStat]:
        """Every item of the source, cheaply (no content read), in a stable order.

        Raises ``SourceUnavailableError`` when the source itself cannot be listed.
        """

    def change_signal(self) -> str:
        """A short value that changes whenever an item is added, changed or removed
        (the sensor compares it with its cursor)."""
        return self.signal_of(self.list_items())

    @staticmethod
    def signal_of(items: Iterable[ItemStat]) -> str:
        """The default ``change_signal`` of a listing (``items`` as ``list_items`` yields them)."""
        digest = hashlib.sha256()
        for item in items:
            digest.update(f"{item.key}\0{item.fingerprint}\n".encode())
        return digest.hexdigest()[:20]

    # ---- watch ---------------------------------------------------------------

    def watch_roots(self) -> list[Path]:
        """Folders (or files) whose file-system events may change the source, for
        ``ragline watch``; none (the default) leaves the source to the sensor."""
        return []

    def watches(self, path: Path) -> bool:
        """Whether an event at ``path``, under a watch root, may change the source."""
        return True

    def list_changed(self, paths: list[Path]) -> ChangedItems | None:
        """The items at and under ``paths`` (file-system events under the watch roots),
        listed as ``list_items`` would list them, without listing the rest: what lets
        a watch run do only the changed items' work. None (the default) when the kind
        cannot tell from the paths alone: the run lists every item. A kind that lists
        changed items keeps the default ``change_signal`` (``ragline watch`` records
        it from its own listing with ``signal_of``)."""
        return None

    # ---- load ----------------------------------------------------------------

    @abstractmethod
    def content_hash(self, item: ItemStat) -> str:
        """A hash of the item's content; raises ``OSError`` when it cannot be read now
        and ``ItemSkipped`` when it must not be read (it leads outside the source)."""

    @abstractmethod
    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        """Parse one item; raises ``ItemSkipped`` / ``ItemError`` with a one-line reason.

        ``content_hash`` is the hash the scan recorded: a kind whose hash names the
        content (a git blob id) reads exactly that version."""

    @abstractmethod
    def file_type(self, key: str) -> str | None:
        """What the item is (``pdf``, ``md``, ``email``…): a facet, and which parser."""

    @abstractmethod
    def parser_version(self, key: str) -> str:
        """The version of the parser for this item; a new one re-parses it."""

    def parse_options(self, allow_deferred_work: bool) -> ParseOptions:
        """The options this source parses with."""
        return options_for(self.config.limits, allow_deferred_work=allow_deferred_work)

    def facets(self, key: str, metadata: dict[str, Any]) -> list[str]:
        """Filterable ``name:value`` pairs of a document, from its key and parsed
        metadata (``type:pdf``; a mail kind adds ``from:…``): no schema change needed."""
        file_type = self.file_type(key)
        return [f"type:{file_type}"] if file_type else []

    # ---- chunk ---------------------------------------------------------------

    def chunker_version(self) -> str:
        """The version of the kind's own chunkers ('' for the shared ones): a new one
        chunks the source's documents again."""
        return ""

    def chunk(
        self, document: DocumentView, count_tokens: CountTokens, target: int, maximum: int
    ) -> list[Chunk]:
        """Chunks of a document: by its sections, then by headings inside each."""
        from rag_sources.chunking import chunk_sections

        return chunk_sections(
            document.body,
            document.body_start_line,
            document.sections,
            count_tokens,
            target,
            maximum,
            max_heading_chars=self.config.limits.max_heading_chars,
            title=document.title,
        )
