"""What a parser makes of one item: a kind-neutral document.

Every source kind (Markdown notes, PDFs, slides, mail, feed entries, code) parses an
item into a ``ParsedDocument``: a text ``body`` whose lines carry file-like line
numbers, plus ``sections`` that anchor line ranges of that body to a citeable place
(a page, a slide, a sheet, a chapter). The stages, search and MCP only ever see this
shape, so they never branch on the kind or the file type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

from rag_sources.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "BodyBuilder",
    "ItemError",
    "ItemSkipped",
    "Link",
    "ParseOptions",
    "ParsedDocument",
    "Section",
    "json_safe",
    "options_for",
]


class ItemSkipped(Exception):
    """The item is deliberately not indexed (empty, binary, no text); ``str(e)`` says why."""


class ItemError(Exception):
    """The item cannot be indexed; ``str(e)`` says what is wrong and what to do."""


@dataclass(frozen=True)
class Link:
    """One outgoing link of a document (a note's [[wikilink]], an embed, ...)."""

    target: str  # name or path as written ("" for a same-document link like [[#Heading]])
    heading: str | None  # "Heading" from [[Note#Heading]]
    block: str | None  # "abc123" from [[Note#^abc123]]
    alias: str | None  # "shown text" from [[Note|shown text]]
    embed: bool  # True for ![[...]]
    line: int  # 1-based line in the file (or in the body for non-text formats)


@dataclass(frozen=True)
class Section:
    """A citeable part of a document: lines ``line_start..line_end`` of its body.

    ``anchor`` is the fragment a citation appends to the path (``page=6``,
    ``slide=3``, ``sheet=Sales``, ``chapter=4``); ``label`` is what a person reads
    ("Page 6", "Slide 3: Roadmap", "Chapter 4: The Carpet-Bag"); ``heading_path`` is
    the enclosing headings where the section starts (a PDF's outline entry, an EPUB
    chapter title), given to the embedder as context.
    """

    anchor: str
    label: str
    line_start: int
    line_end: int
    heading_path: tuple[str, ...] = ()
    ocr: bool = False  # the text was recognised from an image
    # False: shown with the document but not chunked, embedded or keyword-indexed (a
    # mail's quoted reply and signature: they would make every reply match its parent).
    embed: bool = True

    def as_json(self) -> dict[str, Any]:
        raw = {
            "anchor": self.anchor,
            "label": self.label,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "heading_path": list(self.heading_path),
            "ocr": self.ocr,
        }
        if not self.embed:  # stored only when off: older documents read back unchanged
            raw["embed"] = False
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Section:
        return cls(
            anchor=str(raw["anchor"]),
            label=str(raw.get("label") or raw["anchor"]),
            line_start=int(raw["line_start"]),
            line_end=int(raw["line_end"]),
            heading_path=tuple(raw.get("heading_path") or ()),
            ocr=bool(raw.get("ocr")),
            embed=bool(raw.get("embed", True)),
        )


@dataclass(frozen=True)
class ParseOptions:
    """How a source wants its items parsed."""

    ocr: str = "auto"  # "auto": OCR pages and images without a text layer; "off": never
    ocr_languages: tuple[str, ...] = ("eng",)
    # False in an indexing run's first pass: costly work (OCR) is left for a deferred
    # pass and recorded in ``ParsedDocument.deferred``, so other items are not held up.
    allow_deferred_work: bool = True
    max_rows_per_sheet: int = 2000  # spreadsheets: rows kept per sheet (the rest counted)
    max_chars: int = 20_000_000  # text kept per document (the rest dropped with a warning)
    # The source's caps on one item (pixels, unpacked bytes, nesting…); the two above
    # are its ``max_sheet_rows`` and ``max_document_chars`` (``options_for``).
    limits: Limits = DEFAULT_LIMITS


def options_for(limits: Limits, **settings: Any) -> ParseOptions:
    """Parse options under ``limits`` (``settings``: the other ``ParseOptions`` fields)."""
    return ParseOptions(
        max_rows_per_sheet=limits.max_sheet_rows,
        max_chars=limits.max_document_chars,
        limits=limits,
        **settings,
    )


@dataclass(frozen=True)
class ParsedDocument:
    """One parsed item, ready for chunking.

    ``body`` uses ``\\n`` newlines; its first line is line ``body_start_line`` of the
    item (a note's frontmatter is not part of its body). For formats without lines
    of their own (PDF, slides, EPUB), the body is the extracted text and its line
    numbers are the body's own. ``title`` is None when the content names none (the
    stage then uses the file name). ``metadata`` must be JSON-safe (``json_safe``).
    """

    body: str
    title: str | None = None
    body_start_line: int = 1
    sections: tuple[Section, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()
    created: datetime | None = None
    updated: datetime | None = None
    warnings: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()  # costly work left for a deferred pass ("OCR of pages 3-4")


class BodyBuilder:
    """Builds a body section by section and records each section's line range.

    >>> b = BodyBuilder()
    >>> b.add("page=1", "Page 1", "first page text")
    >>> b.add("page=2", "Page 2", "")      # empty parts take no lines and no section
    >>> doc = b.document(title="T")
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._sections: list[Section] = []
        self._next_line = 1

    def add(
        self,
        anchor: str,
        label: str,
        text: str,
        heading_path: tuple[str, ...] | list[str] = (),
        ocr: bool = False,
        embed: bool = True,
    ) -> Section | None:
        """Append one section's text (followed by a blank line); None if it is empty.
        ``embed=False``: shown with the document, never chunked (``Section.embed``)."""
        text = text.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
        if not text.strip():
            return None
        lines = text.count("\n") + 1
        section = Section(
            anchor, label, self._next_line, self._next_line + lines - 1, tuple(heading_path), ocr,
            embed,
        )  # fmt: skip
        self._parts.append(text)
        self._sections.append(section)
        self._next_line += lines + 1  # a blank line between sections
        return section

    @property
    def sections(self) -> list[Section]:
        return list(self._sections)

    @property
    def chars(self) -> int:
        return sum(len(p) for p in self._parts)

    def body(self) -> str:
        return "\n\n".join(self._parts) + ("\n" if self._parts else "")

    def document(self, **fields: Any) -> ParsedDocument:
        """The ``ParsedDocument`` of what was added (other fields as keywords)."""
        return ParsedDocument(body=self.body(), sections=tuple(self._sections), **fields)


def json_safe(value: Any) -> Any:
    """``value`` with dates as ISO strings and everything else JSON-serialisable."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int):
        # Past 64 bits as text: JSON readers and Arrow cannot hold such numbers, and
        # Python refuses to print one of more than 4,300 digits in decimal.
        if -(2**63) <= value < 2**63:
            return value
        return str(value) if value.bit_length() < 14_000 else hex(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)
