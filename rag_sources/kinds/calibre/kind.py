"""``kind = "calibre"``: a Calibre library, read-only — one book, one document.

Listing reads ``metadata.db`` (``rag_sources.kinds.calibre.library``): one item per book,
keyed by the path of the format file that is read (the first of ``formats`` that the
book has and a parser reads), fingerprinted by ``last_modified``, that file's size
and mtime and a hash of the indexed metadata. A book without a readable format is
skipped, one whose file is missing is an error; the others index.

A book's document is a first section ``about`` with Calibre's metadata (title,
authors, series, tags, publisher, rating, dates, identifiers and the comments as
text), then the book file's text as its parser makes it (EPUB ``chapter=N``, PDF
``page=N``…), its sections moved down by the lines the metadata takes. The title,
authors, tags, series and publisher are Calibre's, never the file's own. ``created``
is the publication date, ``updated`` Calibre's last change; the item's mtime (what
date filters compare) is the book file's.

The content hash is the file's SHA-256 combined with the metadata hash: a change
Calibre makes that touches neither (a cover) is not parsed again. The sensor's change
signal is metadata.db's size and mtime.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from rag_sources.formats import router
from rag_sources.formats.model import (
    ItemError,
    ItemSkipped,
    ParsedDocument,
    ParseOptions,
    Section,
    options_for,
)
from rag_sources.kinds.base import ItemStat, SourceKind
from rag_sources.kinds.calibre import library
from rag_sources.kinds.calibre.config import CalibreSourceConfig
from rag_sources.kinds.calibre.library import Book
from rag_sources.kinds.files import source_file_sha256
from rag_sources.scanning import OutsideSourceError, pinned_source_file

BOOK_PARSER = "calibre/1"
ABOUT_ANCHOR = "about"
# What a book file's parser says of it that Calibre's metadata replaces.
_REPLACED_KEYS = frozenset(
    {"title", "author", "authors", "creator", "publisher", "description", "subject", "date"}
)


class CalibreKind(SourceKind):
    name = "calibre"
    config_type = CalibreSourceConfig

    @property
    def calibre(self) -> CalibreSourceConfig:
        return self.config  # type: ignore[return-value]

    @cached_property
    def real_root(self) -> Path:
        return library.library_root(self.calibre)

    # ---- list ----------------------------------------------------------------

    def list_items(self) -> Iterator[ItemStat]:
        for item in library.list_books(self.calibre):
            yield ItemStat(
                item.key, item.fingerprint, item.size, item.mtime_ns, item.problem, item.severity,
                item.unavailable,
            )  # fmt: skip

    def change_signal(self) -> str:
        return library.change_signal(self.calibre)

    # ---- watch ---------------------------------------------------------------

    def watch_roots(self) -> list[Path]:
        return [Path(self.config.path)]

    def watches(self, path: Path) -> bool:
        # metadata.db (and its journal) for any edit in Calibre, book files for a new format.
        return not path.name.startswith(".")

    # ---- load ----------------------------------------------------------------

    def content_hash(self, item: ItemStat) -> str:
        file_hash = source_file_sha256(self.real_root, item.key)
        metadata_hash = item.fingerprint.rsplit("|", 1)[-1]
        return hashlib.sha256(f"{file_hash}|{metadata_hash}".encode()).hexdigest()

    def file_type(self, key: str) -> str | None:
        return router.file_type(key)

    def parser_version(self, key: str) -> str:
        file_type = self.file_type(key) or ""
        return f"{BOOK_PARSER}+{router.PARSER_VERSIONS.get(file_type, 'none')}"

    def parse_options(self, allow_deferred_work: bool) -> ParseOptions:
        return options_for(
            self.calibre.limits,
            ocr=self.calibre.ocr,
            ocr_languages=tuple(self.calibre.ocr_languages),
            allow_deferred_work=allow_deferred_work,
        )

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        book = library.find_book(self.calibre, key)
        fmt = book.format_of(key) if book is not None else None
        if book is None or fmt is None:
            raise ItemError("the book is no longer in the Calibre library; run the source again")
        file_type = self.file_type(key)
        if file_type is None:
            raise ItemSkipped(f"no parser reads {fmt.upper()} files")
        warnings: list[str] = []
        parsed: ParsedDocument | None
        try:
            with pinned_source_file(self.real_root, key) as path:
                parsed = router.parse_file(path, key, file_type, options)
        except OutsideSourceError as exc:
            raise ItemSkipped(exc.strerror or str(exc)) from None
        except ItemSkipped as exc:  # no text (a scan without OCR): the metadata still counts
            parsed = None
            what = f"no text from the {fmt.upper()} file ({exc})"
            warnings.append(f"{what}; only Calibre's metadata is indexed")
        return book_document(book, fmt, parsed, warnings, options)

    def facets(self, key: str, metadata: dict[str, Any]) -> list[str]:
        facets = super().facets(key, metadata)
        authors = [str(a) for a in metadata.get("authors") or () if str(a).strip()]
        facets += [f"author:{v}" for v in dict.fromkeys(_fold(a) for a in authors)]
        facets += [f"author_name:{v}" for v in dict.fromkeys(_shown(a) for a in authors)]
        series = str(metadata.get("series") or "")
        if series.strip():
            facets += [f"series:{_fold(series)}", f"series_name:{_shown(series)}"]
        publisher = str(metadata.get("publisher") or "")
        if publisher.strip():
            facets.append(f"publisher:{_fold(publisher)}")
        return facets


def _fold(text: str) -> str:
    return " ".join(text.split()).lower()


def _shown(text: str) -> str:
    return " ".join(text.split())


def comments_text(html: str | None, max_depth: int | None = None) -> str:
    """Calibre's comments (HTML, or plain text from old libraries) as text; elements
    nested deeper than ``max_depth`` (the source's ``max_nesting_depth``) as text."""
    if not html or not html.strip():
        return ""
    if "<" not in html:
        return html.strip()
    from rag_sources.formats.html import html_text

    try:
        return html_text(html, boilerplate=False, max_depth=max_depth).text.strip()
    except ItemSkipped:
        return ""


def _series_index(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else str(value)


def about_text(book: Book, fmt: str, comments: str) -> str:
    """The metadata section's text: what Calibre says of the book."""
    lines = [book.title]
    if book.authors:
        lines.append(f"by {', '.join(book.authors)}")
    lines.append("")
    if book.series:
        index = _series_index(book.series_index)
        lines.append(f"Series: {book.series}" + (f" #{index}" if index else ""))
    if book.tags:
        lines.append(f"Tags: {', '.join(book.tags)}")
    if book.publisher:
        lines.append(f"Publisher: {book.publisher}")
    if book.pubdate:
        lines.append(f"Published: {book.pubdate.date().isoformat()}")
    if book.rating:
        lines.append(f"Rating: {book.rating}/5")
    if book.identifiers:
        shown = ", ".join(f"{k}:{v}" for k, v in sorted(book.identifiers.items()))
        lines.append(f"Identifiers: {shown}")
    if book.languages:
        lines.append(f"Languages: {', '.join(book.languages)}")
    others = [f.upper() for f, _ in book.formats if f != fmt]
    lines.append(f"Format: {fmt.upper()}" + (f" (also {', '.join(others)})" if others else ""))
    text = "\n".join(lines)
    return f"{text}\n\n{comments}" if comments else text


def book_document(
    book: Book,
    fmt: str,
    parsed: ParsedDocument | None,
    warnings: list[str],
    options: ParseOptions | None = None,
) -> ParsedDocument:
    """The book's document: the ``about`` section, then the file's sections moved
    down by the lines it takes (links too), so every anchor keeps its text."""
    limits = (options or ParseOptions()).limits
    comments = comments_text(book.comments, limits.max_nesting_depth)
    about = about_text(book, fmt, comments).replace("\r", "")
    about_lines = about.count("\n") + 1
    title_path = (book.title,)
    sections = [Section(ABOUT_ANCHOR, "About the book", 1, about_lines, title_path)]
    body = about + "\n"
    links: tuple[Any, ...] = ()
    if parsed is not None and parsed.body.strip():
        text = parsed.body.rstrip("\n")
        first = about_lines + 2  # after one blank line
        shift = first - parsed.body_start_line
        last = first + text.count("\n")
        moved = [
            replace(
                s,
                line_start=s.line_start + shift,
                line_end=min(s.line_end + shift, last),
                heading_path=_under_title(book.title, s.heading_path),
            )
            for s in parsed.sections
        ]
        if not moved:  # a text or Markdown book: one section, chunked by its headings
            moved = [Section("text", "Text", first, last, title_path)]
        sections += moved
        body = f"{about}\n\n{text}\n"
        links = tuple(replace(link, line=link.line + shift) for link in parsed.links)
    own = {k: v for k, v in (parsed.metadata if parsed else {}).items() if k not in _REPLACED_KEYS}
    metadata = {
        **own,
        **book.fields(),
        "comments": comments or None,
        "format": fmt,
    }
    return ParsedDocument(
        body=body,
        title=book.title,
        body_start_line=1,
        sections=tuple(sections),
        metadata=metadata,
        tags=tuple(dict.fromkeys(t.lower() for t in book.tags)),
        links=links,
        created=book.pubdate,
        updated=book.modified,
        warnings=(*(parsed.warnings if parsed else ()), *warnings),
        deferred=parsed.deferred if parsed else (),
    )


def _under_title(title: str, path: tuple[str, ...]) -> tuple[str, ...]:
    """A section's heading path under the book's title (context for the embedder)."""
    return path if path and path[0] == title else (title, *path)
