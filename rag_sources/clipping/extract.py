"""What a clip says about itself: a page's main text (the project's own extractor,
``formats.html``), title, author, published date and canonical URL (``<link
rel=canonical>``, OpenGraph / article meta, JSON-LD), or a PDF's title and author
from its metadata."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from rag_sources.clipping.download import ClipError, Download
from rag_sources.formats.html import decode_html, html_text
from rag_sources.formats.model import ItemSkipped

MAX_FIELD_CHARS = 300  # of a title or an author kept
# Text that markdown would read as a tag ("#word") or a wikilink ("[[x]]") of the note.
_HASHTAG = re.compile(r"(?<!\S)#(?=[\w/-])")
_WIKILINK_OPEN = re.compile(r"\[\[")


@dataclass(frozen=True)
class Extracted:
    """The clip's metadata and, for a page, its main text as Markdown."""

    title: str
    canonical_url: str
    author: str | None = None
    published: date | None = None
    body: str = ""  # Markdown; empty for a PDF (the PDF itself is indexed)
    description: str | None = None


def normalized_url(url: str) -> str:
    """``url`` without its fragment, with a lower-case scheme and host and without the
    default port: how two URLs of the same page compare."""
    parts = urlsplit(url.strip())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not host:
        return urlunsplit((scheme, parts.netloc, parts.path, parts.query, ""))
    port = parts.port
    default = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port in (None, default) else f"{host}:{port}"
    if ":" in host:  # IPv6
        netloc = f"[{host}]" if port in (None, default) else f"[{host}]:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def extract(got: Download, max_depth: int | None = None) -> Extracted:
    """The metadata (and a page's text) of a download; raises ``ClipError``."""
    if got.kind == "pdf":
        return _pdf(got)
    return _page(got, max_depth)


def _page(got: Download, max_depth: int | None) -> Extracted:
    warnings: list[str] = []
    try:
        html = decode_html(got.content, warnings)
    except ItemSkipped as exc:
        raise ClipError(f"{got.url}: {exc}; not a web page") from None
    text = html_text(html, max_depth=max_depth)
    body = "\n\n".join(_markdown_inert(block) for block in text.blocks)
    if not body.strip():
        raise ClipError(f"{got.url}: the page has no text to keep (a page built by scripts?)")
    meta = text.metadata
    canonical = _absolute(meta.get("canonical"), got.final_url) or got.final_url
    title = meta.get("title") or text.title or got.name or urlsplit(got.final_url).netloc
    return Extracted(
        title=_field(title) or "Untitled page",
        canonical_url=normalized_url(canonical),
        author=_field(meta.get("author")),
        published=_day(meta.get("date")),
        body=body,
        description=_field(meta.get("description")),
    )


def _markdown_inert(block: str) -> str:
    """A block of page text that adds no tag or link to the note it is kept in (a
    heading's own ``#`` stays)."""
    lines = []
    for line in block.split("\n"):
        marker = re.match(r"#{1,6} ", line)
        head, rest = (line[: marker.end()], line[marker.end() :]) if marker else ("", line)
        rest = _WIKILINK_OPEN.sub(r"[\\[", _HASHTAG.sub(r"\\#", rest))
        lines.append(head + rest)
    return "\n".join(lines)


def _pdf(got: Download) -> Extracted:
    from rag_sources.formats.pdf import pymupdf_module

    pymupdf = pymupdf_module()
    try:
        with pymupdf.open(stream=got.content, filetype="pdf") as document:
            if document.needs_pass:
                raise ClipError(
                    f"{got.url}: the PDF is password-protected; ragline cannot index it"
                )
            meta = document.metadata or {}
    except ClipError:
        raise
    except Exception as exc:  # PyMuPDF's errors have no common base
        raise ClipError(f"{got.url}: not a readable PDF ({exc}); check the URL") from None
    stem = re.sub(r"\.pdf$", "", got.name, flags=re.IGNORECASE)
    title = _field(meta.get("title")) or stem.replace("_", " ").replace("-", " ").strip()
    return Extracted(
        title=title or "Untitled PDF",
        canonical_url=normalized_url(got.final_url),
        author=_field(meta.get("author")),
        published=_pdf_day(meta.get("creationDate")),
    )


def _pdf_day(raw: str | None) -> date | None:
    from rag_sources.formats.pdf import pdf_date

    found = pdf_date(raw)
    return found.date() if found else None


def _absolute(url: str | None, base: str) -> str | None:
    if not url:
        return None
    joined = urljoin(base, url)
    return joined if urlsplit(joined).scheme in ("http", "https", "file") else None


def _field(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    return text[:MAX_FIELD_CHARS] or None


def _day(value: str | None) -> date | None:
    """The date of an ISO 8601 date or date-time (what pages declare), else None."""
    if not value:
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).date()
    except ValueError:
        pass
    match = re.match(r"(\d{4})-(\d{2})-(\d{2})", text)
    if match:
        try:
            return date(*map(int, match.groups()))
        except ValueError:
            return None
    return None
