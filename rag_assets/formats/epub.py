"""EPUB books with ebooklib (package, spine, TOC, metadata) and selectolax (chapters).

One section per spine document that has text, in reading order: anchor
``chapter=N`` (N counts the sections with text), label and ``heading_path`` from
the TOC entry of that document, else its first heading, else ``Chapter N``.
Headings inside a chapter become markdown ``#`` lines.

ebooklib reads every manifest item into memory and fails the whole book when one
is missing from the ZIP (2 of the 13 test books list audio/video they do not
ship). ``_Reader`` reads a missing item as empty (recorded as a warning) and does
not load media, fonts or style sheets at all, so memory follows the text.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from rag_assets.formats.archive import ZIP_ERRORS, check_archive
from rag_assets.formats.html import decode_html, html_text
from rag_assets.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    ParsedDocument,
    ParseOptions,
)
from rag_assets.formats.text import heading_line, short_error

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


def _flatten_toc(toc: Any, resolve: Any) -> dict[str, tuple[str | None, list[str]]]:
    """TOC entries (Links, Sections, nested tuples) by document path:
    ``{path: (title of an entry for the whole document, titles of entries into it)}``."""
    from ebooklib import epub

    found: dict[str, tuple[str | None, list[str]]] = {}
    stack = list(reversed(toc if isinstance(toc, list | tuple) else [toc]))
    while stack:
        entry = stack.pop()
        if isinstance(entry, tuple | list):
            stack.extend(reversed(entry))
            continue
        if isinstance(entry, epub.Link | epub.Section):
            href = str(getattr(entry, "href", None) or "")
            title = " ".join(str(entry.title or "").split())
            if not href or not title:
                continue
            path = resolve(href)
            whole, parts = found.get(path, (None, []))
            if "#" in href:
                parts.append(title)
            elif whole is None:
                whole = title
            found[path] = (whole, parts)
    return found


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
    """Parse one EPUB into one section per spine document with text."""
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
            "the table of contents could not be read; chapter titles come from headings"
        )

    titles = _toc_titles(book)
    builder = BodyBuilder()
    seen: set[str] = set()
    by_id: dict[str, Any] = {}
    for entry in book.get_items():  # first of an id wins, as in get_item_with_id
        by_id.setdefault(entry.id, entry)
    for idref, _linear in book.spine:
        item = by_id.get(idref)
        if item is None or item.media_type not in _HTML_TYPES or isinstance(item, epub.EpubNav):
            continue
        name = posixpath.normpath(item.get_name())
        if name in seen:
            continue
        seen.add(name)
        content = item.content or b""
        item.content = b""  # the chapter's bytes are not needed again
        if not content:
            continue
        try:
            chapter = html_text(
                decode_html(content, []),
                boilerplate=False,
                max_depth=options.limits.max_nesting_depth,
            )
        except ItemSkipped:  # binary junk in a chapter
            continue
        for warning in chapter.warnings:
            if warning not in warnings:
                warnings.append(warning)
        if not chapter.blocks:
            continue
        number = len(builder.sections) + 1
        title = titles.get(name) or (chapter.headings[0][1] if chapter.headings else None)
        blocks = chapter.blocks
        # The chapter's own first heading repeats its title: keep it as plain text,
        # so chunk heading paths do not read "Loomings > Loomings".
        if title and chapter.headings and _same(chapter.headings[0][1], title):
            first = heading_line(chapter.headings[0][0], chapter.headings[0][1])
            blocks = [b if b != first else b.lstrip("#").strip() for b in blocks]
        text = "\n\n".join(blocks)
        if builder.chars + len(text) > options.max_chars:
            warnings.append(
                f"text cut at {options.max_chars:,} characters (before chapter {number}); "
                "raise max_chars or split the book to index the rest"
            )
            break
        label = title or f"Chapter {number}"
        builder.add(f"chapter={number}", label, text, (title,) if title else ())
    if not builder.sections:
        raise ItemSkipped("no text in any chapter of the book")
    metadata, title = _metadata(book)
    metadata["chapter_count"] = len(builder.sections)
    return builder.document(title=title, metadata=metadata, warnings=tuple(warnings))


def _toc_titles(book: Any) -> dict[str, str]:
    from ebooklib import epub

    nav = next((i for i in book.get_items() if isinstance(i, epub.EpubNav)), None)
    ncx = next((i for i in book.get_items() if isinstance(i, epub.EpubNcx)), None)
    # Nav hrefs come resolved against the OPF folder; NCX hrefs are relative to the NCX.
    base = "" if nav is not None or ncx is None else posixpath.dirname(ncx.get_name())

    def resolve(href: str) -> str:
        path = unquote(href.split("#", 1)[0])
        return posixpath.normpath(posixpath.join(base, path)) if path else ""

    try:
        found = _flatten_toc(book.toc, resolve)
    except Exception:  # an odd TOC shape costs the titles, not the book
        return {}
    titles: dict[str, str] = {}
    for path, (whole, parts) in found.items():
        # Several entries pointing into one document name its parts, not the document:
        # then its own headings say more.
        title = whole or (parts[0] if len(parts) == 1 else None)
        if title:
            titles[path] = title
    return titles


def _reason(exc: BaseException, path: Path) -> str:
    return short_error(exc, path)
