"""EPUB books with ebooklib (package, spine, TOC, metadata) and selectolax (chapters).

Sections follow the book's table of contents (nav.xhtml, else toc.ncx), as a
reader shows it: each entry that points at text starts a section there — a whole
spine document, or the element its ``#fragment`` names, so a poem in one file with
five parts in its contents has five sections. The anchor is the entry's place in
the contents, ``chapter=N`` (``chapter=14.1.2``: the second entry inside the first
inside the fourteenth), never the spine index: a cover or title page before
chapter I does not move its number. The label is the entry's title and the
``heading_path`` the titles of the entries around it. Text no entry points at (a
cover, a title page, the rest of a chapter split over two files) is a section
anchored by its file, ``file=xhtml/cover.xhtml``, labelled by its first heading
(else "<previous entry> (continued)"). Headings inside a section become markdown
``#`` lines; the one repeating the section's title stays plain text.

ebooklib reads every manifest item into memory and fails the whole book when one
is missing from the ZIP (2 of the 13 test books list audio/video they do not
ship). ``_Reader`` reads a missing item as empty (recorded as a warning) and does
not load media, fonts or style sheets at all, so memory follows the text.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from rag_sources.formats.archive import ZIP_ERRORS, check_archive
from rag_sources.formats.html import decode_html, html_text
from rag_sources.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    ParsedDocument,
    ParseOptions,
)
from rag_sources.formats.text import short_error

__all__ = ["parse_epub"]

# Manifest items never read: the text is all in (X)HTML documents.
_UNREAD_SUFFIXES = (
    ".jpg", ".jpeg", ".png", ".gif", ".webp", ".bmp", ".tif", ".tiff", ".svg",
    ".mp3", ".mp4", ".m4a", ".m4v", ".ogg", ".oga", ".ogv", ".webm", ".wav", ".aac",
    ".ttf", ".otf", ".woff", ".woff2", ".eot", ".css", ".js", ".pls", ".smil",
)  # fmt: skip
_HTML_TYPES = ("application/xhtml+xml", "text/html")


def _reader_class() -> type:
    from ebooklib import epub

    class _Reader(epub.EpubReader):  # type: ignore[misc]
        """An EpubReader that tolerates missing items and skips media."""

        def __init__(self, name: str) -> None:
            super().__init__(name, {"ignore_ncx": True})
            self.missing: list[str] = []
            self.damaged: list[str] = []
            self.nav_failed = False
            # Each member read once: a manifest may name one member under thousands of
            # ids, and ebooklib would hold a copy per id (emptied after loading).
            self.read_once: dict[str, bytes] = {}

        def read_file(self, name: str) -> bytes:
            name = posixpath.normpath(name)
            if name in self.read_once:
                return self.read_once[name]
            data = b""
            if name.lower().endswith(_UNREAD_SUFFIXES):
                try:
                    self.zf.getinfo(name)
                except KeyError:
                    self.missing.append(name)
            else:
                try:
                    data = bytes(super().read_file(name))
                except KeyError:
                    self.missing.append(name)
                except ZIP_ERRORS:  # a damaged member costs that chapter, not the book
                    self.damaged.append(name)
            self.read_once[name] = data
            return data

        def _parse_nav(self, data: Any, base_path: str, navtype: str = "toc") -> None:
            try:
                super()._parse_nav(data, base_path, navtype=navtype)
            except Exception:  # a nav document without the expected <nav>/<ol>
                self.nav_failed = self.nav_failed or navtype == "toc"

        def _parse_ncx(self, data: Any) -> None:
            try:
                super()._parse_ncx(data)
            except Exception:  # an empty or broken NCX: no TOC from it
                self.nav_failed = True

    return _Reader


@dataclass(frozen=True)
class _TocEntry:
    """One entry of the book's table of contents (nav.xhtml or toc.ncx)."""

    number: str  # its place in the contents: "5", or "14.1.2" inside entries
    title: str
    path: str  # the document it points at ("" for a heading without a link)
    fragment: str | None  # the element inside it (None: the document's start)
    trail: tuple[str, ...]  # the titles of its enclosing entries and its own


def _toc_level(items: Any) -> list[tuple[Any, list[Any]]]:
    """One level of ebooklib's TOC as (entry, children) pairs: a Link or Section
    alone, or a (Section, [children]) pair; bare nested lists continue the level."""
    from ebooklib import epub

    pairs: list[tuple[Any, list[Any]]] = []
    pending = list(reversed(items)) if isinstance(items, list | tuple) else [items]
    while pending:
        item = pending.pop()
        if isinstance(item, epub.Link | epub.Section):
            pairs.append((item, []))
        elif isinstance(item, tuple | list):
            if (
                len(item) == 2
                and isinstance(item[0], epub.Link | epub.Section)
                and isinstance(item[1], list | tuple)
            ):
                pairs.append((item[0], list(item[1])))
            else:
                pending.extend(reversed(item))
    return pairs


def _toc_entries(book: Any) -> list[_TocEntry]:
    """The book's table of contents in its order, each entry numbered by its place
    (``3``, ``3.2``: the second entry inside the third), as a reader counts them."""
    from ebooklib import epub

    nav = next((i for i in book.get_items() if isinstance(i, epub.EpubNav)), None)
    ncx = next((i for i in book.get_items() if isinstance(i, epub.EpubNcx)), None)
    # Nav hrefs come resolved against the OPF folder; NCX hrefs are relative to the NCX.
    base = "" if nav is not None or ncx is None else posixpath.dirname(ncx.get_name())
    entries: list[_TocEntry] = []
    # depth first without recursion: (pairs of one level, next index, number, trail)
    stack: list[tuple[list[tuple[Any, list[Any]]], int, tuple[int, ...], tuple[str, ...]]]
    stack = [(_toc_level(book.toc), 0, (), ())]
    while stack:
        pairs, index, number, trail = stack.pop()
        if index >= len(pairs):
            continue
        stack.append((pairs, index + 1, number, trail))
        item, children = pairs[index]
        own = (*number, index + 1)
        title = " ".join(str(item.title or "").split())
        href = str(getattr(item, "href", None) or "")
        target, _, fragment = href.partition("#")
        path = unquote(target)
        path = posixpath.normpath(posixpath.join(base, path)) if path else ""
        inner = (*trail, title) if title else trail
        entries.append(
            _TocEntry(".".join(map(str, own)), title, path, unquote(fragment) or None, inner)
        )
        if children:
            stack.append((_toc_level(children), 0, own, inner))
    return entries


def _metadata(book: Any) -> tuple[dict[str, Any], str | None]:
    def values(name: str) -> list[str]:
        try:
            found = book.get_metadata("DC", name)
        except Exception:
            return []
        out = []
        for value, _attrs in found:
            text = " ".join(str(value or "").split())
            if text and text not in out:
                out.append(text)
        return out

    metadata: dict[str, Any] = {}
    title = next(iter(values("title")), None)
    if title:
        metadata["title"] = title
    creators = values("creator")
    if creators:
        metadata["author"] = ", ".join(creators)
        metadata["authors"] = creators
    for name in ("language", "date", "publisher", "description", "subject"):
        found = values(name)
        if found:
            metadata[name] = found[0] if name != "subject" else found
    return metadata, title


def _same(a: str, b: str) -> bool:
    def norm(s: str) -> str:
        return "".join(c for c in s.casefold() if c.isalnum())

    return bool(norm(a)) and norm(a) == norm(b)


def parse_epub(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """Parse one EPUB into sections by its table of contents (see the module)."""
    try:
        if full_path.stat().st_size == 0:
            raise ItemSkipped("empty file")
    except OSError as exc:
        raise ItemError(f"cannot read the file ({exc.strerror}); check its permissions") from None
    check_archive(full_path, options.limits, "EPUB")
    from ebooklib import epub
    from lxml import etree

    reader = _reader_class()(str(full_path))
    try:
        book = reader.load()
        reader.read_once.clear()
    except (epub.EpubException, OSError, *ZIP_ERRORS) as exc:
        raise ItemError(
            f"not a valid EPUB ({_reason(exc, full_path)}); re-export or exclude the file"
        ) from None
    except (KeyError, IndexError, AttributeError, TypeError, ValueError, etree.LxmlError) as exc:
        # no container.xml / OPF, or an OPF without manifest or spine
        raise ItemError(
            f"damaged EPUB ({_reason(exc, full_path)}); re-export or exclude the file"
        ) from None
    warnings: list[str] = []
    if reader.missing:
        shown = ", ".join(reader.missing[:3]) + (" ..." if len(reader.missing) > 3 else "")
        warnings.append(
            f"{len(reader.missing)} manifest items missing from the EPUB ({shown}); read as empty"
        )
    if reader.damaged:
        shown = ", ".join(reader.damaged[:3]) + (" ..." if len(reader.damaged) > 3 else "")
        warnings.append(f"{len(reader.damaged)} damaged items in the EPUB ({shown}); read as empty")
    if reader.nav_failed:
        warnings.append(
            "the table of contents could not be read; chapters are anchored by their files "
            "(file=...) and named by their headings"
        )

    try:
        entries = _toc_entries(book)
    except Exception:  # an odd TOC shape costs the anchors by entry, not the book
        entries = []
    by_document: dict[str, list[_TocEntry]] = {}
    for entry in entries:
        if entry.path:
            by_document.setdefault(entry.path, []).append(entry)
    builder = BodyBuilder()
    seen: set[str] = set()
    by_id: dict[str, Any] = {}
    for item in book.get_items():  # first of an id wins, as in get_item_with_id
        by_id.setdefault(item.id, item)
    current: _TocEntry | None = None  # the entry whose part the reading is in
    charsets: list[str] = []  # chapters whose charset was not as declared
    for idref, linear in book.spine:
        item = by_id.get(idref)
        if item is None or item.media_type not in _HTML_TYPES or isinstance(item, epub.EpubNav):
            continue
        name = posixpath.normpath(item.get_name())
        if name in seen:
            continue
        seen.add(name)
        content = item.content or b""
        item.content = b""  # the chapter's bytes are not needed again
        targets = by_document.get(name, [])
        if not content:
            current = targets[-1] if targets else current
            continue
        chapter_warnings: list[str] = []
        try:
            chapter = html_text(
                decode_html(content, chapter_warnings),
                boilerplate=False,
                max_depth=options.limits.max_nesting_depth,
                marks={t.fragment for t in targets if t.fragment},
            )
        except ItemSkipped:  # binary junk in a chapter
            continue
        if chapter_warnings:  # its charset: one warning for the book (see below)
            charsets.append(f"{name} {chapter_warnings[0].removeprefix('the page ')}")
        for warning in chapter.warnings:
            if warning not in warnings:
                warnings.append(warning)
        for start, end, entry in _parts(chapter, targets):
            part = _Part(chapter, start, end)
            if entry is not None:
                current = entry
                title = entry.title or part.first_heading()
                anchor, label = f"chapter={entry.number}", title or f"Chapter {entry.number}"
                path: tuple[str, ...] = entry.trail or ((title,) if title else ())
            else:
                # text no entry points at: a cover, a title page, the rest of a chapter
                # split over two files; named after its file, a stable anchor
                anchor = f"file={name}"
                title = part.first_heading()
                if title is None and current is not None and linear != "no":
                    label, path = f"{current.title or current.number} (continued)", current.trail
                else:
                    label = title or chapter.title or posixpath.basename(name)
                    path = (label,)
            text = part.text(title)
            if builder.chars + len(text) > options.max_chars:
                warnings.append(
                    f"text cut at {options.max_chars:,} characters (before {label!r}); "
                    "raise max_chars or split the book to index the rest"
                )
                break
            builder.add(anchor, label, text, path)
        else:
            continue
        break
    if charsets:
        more = f" (and {len(charsets) - 1:,} more chapters)" if len(charsets) > 1 else ""
        warnings.append(f"chapter {charsets[0]}{more}")
    if not builder.sections:
        raise ItemSkipped("no text in any chapter of the book")
    metadata, title = _metadata(book)
    metadata["chapter_count"] = sum(s.anchor.startswith("chapter=") for s in builder.sections)
    return builder.document(title=title, metadata=metadata, warnings=tuple(warnings))


def _parts(chapter: Any, targets: list[_TocEntry]) -> list[tuple[int, int, _TocEntry | None]]:
    """The chapter's blocks split where TOC entries point: (first block, end, entry)
    in reading order; None for text before the first entry. Of entries at one place
    the last in the TOC owns the text (a part's first chapter, not the part); one
    whose element is not there points at the document's start (where a reader opens
    it) unless another entry does."""
    found: dict[str, int] = {}
    for block, fragment in chapter.breaks:
        found.setdefault(fragment, block)
    starts: dict[int, _TocEntry] = {}
    for entry in targets:
        if entry.fragment is None or entry.fragment in found:
            starts[found[entry.fragment] if entry.fragment else 0] = entry
    for entry in targets:  # an id that is not there: the document's start, if free
        if entry.fragment is not None and entry.fragment not in found:
            starts.setdefault(0, entry)
    places = sorted(starts)
    count = len(chapter.blocks)
    parts: list[tuple[int, int, _TocEntry | None]] = []
    if not places or places[0] > 0:
        parts.append((0, places[0] if places else count, None))
    for i, place in enumerate(places):
        parts.append((place, places[i + 1] if i + 1 < len(places) else count, starts[place]))
    return parts


class _Part:
    """Blocks ``start:end`` of an extracted chapter."""

    def __init__(self, chapter: Any, start: int, end: int) -> None:
        self.chapter, self.start, self.end = chapter, start, end

    def headings(self) -> list[tuple[int, int, str]]:
        """(block, level, text) of the headings in the part."""
        return [
            (block, level, text)
            for block, (level, text) in zip(
                self.chapter.heading_blocks, self.chapter.headings, strict=True
            )
            if self.start <= block < self.end
        ]

    def first_heading(self) -> str | None:
        found = self.headings()
        return found[0][2] if found else None

    def text(self, title: str | None) -> str:
        """The part's text. Its first heading, when it repeats the title, is kept as
        plain text, so chunk heading paths do not read "Loomings > Loomings"."""
        blocks = self.chapter.blocks[self.start : self.end]
        found = self.headings()
        if title and found and _same(found[0][2], title):
            index = found[0][0] - self.start
            blocks = [*blocks[:index], found[0][2], *blocks[index + 1 :]]
        return "\n\n".join(blocks)


def _reason(exc: BaseException, path: Path) -> str:
    return short_error(exc, path)
