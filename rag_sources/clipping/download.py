"""Getting what a clip is made of: a web page or a PDF over HTTP (the feeds' safety
rules: timeouts and one deadline, size and decompression caps, no redirect into a
more private network), or a local file read up to the same size cap."""

from __future__ import annotations

import stat as stat_mode
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal
from urllib.parse import unquote, urlsplit

from rag_sources.errors import RaglineError
from rag_sources.net.fetch import FetchError, Wording, fetch_url

USER_AGENT = "ragline-clip/1"
ACCEPT = "text/html, application/xhtml+xml, application/pdf;q=0.9, */*;q=0.5"
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
SNIFF_BYTES = 1024  # of a body whose type the server did not say

Kind = Literal["html", "pdf"]


class ClipError(RaglineError):
    """A URL or file that cannot be clipped; one line naming it and what to do."""


@dataclass(frozen=True)
class Download:
    """What was fetched or read: ``url`` as given (a local file: its ``file://`` URL),
    ``final_url`` after redirects, and whether it is a page or a PDF."""

    url: str
    final_url: str
    content: bytes
    kind: Kind
    name: str  # the last part of its path, for a title of last resort


def is_web_address(target: str) -> bool:
    return urlsplit(target).scheme.lower() in ("http", "https")


def clip_wording() -> Wording:
    return Wording(
        thing="page", timeout_setting="[clip] timeout_s", size_setting="[clip] max_bytes"
    )


def download(
    target: str,
    *,
    timeout: float,
    max_bytes: int,
    reach: int | None = None,
    allow_local: bool = True,
) -> Download:
    """Fetch ``target`` (an http(s) URL) or read it (a local path or ``file://`` URL,
    when ``allow_local``); raises ``ClipError``. ``reach``: the most private network
    the fetch may connect to (default: that of the URL's own host)."""
    if is_web_address(target):
        try:
            fetched = fetch_url(
                target,
                headers={"User-Agent": USER_AGENT, "Accept": ACCEPT},
                timeout=timeout,
                max_bytes=max_bytes,
                wording=clip_wording(),
                reach=reach,
            )
        except FetchError as exc:
            raise ClipError(str(exc)) from None
        content = fetched.content or b""
        name = PurePosixPath(unquote(urlsplit(fetched.url).path)).name
        kind = _kind_of(target, fetched.media_type, name, content)
        return Download(target, fetched.url, content, kind, name)
    if "://" in target and not target.lower().startswith("file://"):
        raise ClipError(
            f"{target}: not a web address (http, https) or a file; give an http(s) URL or a path"
        )
    if not allow_local:
        raise ClipError(f"{target}: only http(s) URLs can be clipped here, not files")
    return _read_local(target, max_bytes)


def _kind_of(label: str, media_type: str, name: str, content: bytes) -> Kind:
    head = content[:SNIFF_BYTES].lstrip().lower()
    if media_type in PDF_TYPES or content.startswith(b"%PDF-"):
        if not content.startswith(b"%PDF-"):
            raise ClipError(f"{label}: served as a PDF, but it is not one; check the URL")
        return "pdf"
    if media_type in HTML_TYPES:
        return "html"
    untyped = media_type in ("", "application/octet-stream", "text/plain")
    if untyped and (head.startswith((b"<!doctype html", b"<html")) or b"<html" in head):
        return "html"
    if untyped and name.lower().endswith(HTML_SUFFIXES):
        return "html"
    shown = media_type or "of no declared type"
    raise ClipError(
        f"{label}: the content is {shown}, not a web page (HTML) or a PDF; ragline clips "
        "pages and PDFs (save other files into a source folder instead)"
    )


def _read_local(target: str, max_bytes: int) -> Download:
    path = Path(unquote(urlsplit(target).path)) if target.lower().startswith("file://") else None
    path = (path or Path(target)).expanduser()
    try:
        info = path.stat()
        if stat_mode.S_ISDIR(info.st_mode):
            raise ClipError(f"{target}: is a folder; give a page (.html) or a PDF file")
        if not stat_mode.S_ISREG(info.st_mode):
            raise ClipError(f"{target}: not a regular file; give a page (.html) or a PDF file")
        if info.st_size > max_bytes:
            raise ClipError(_too_big(target, max_bytes, info.st_size))
        with path.open("rb") as handle:
            content = handle.read(max_bytes + 1)  # the file may have grown since
    except FileNotFoundError:
        raise ClipError(f"{target}: no such file; check the path") from None
    except PermissionError:
        raise ClipError(f"{target}: cannot be read (permission denied)") from None
    except OSError as exc:
        raise ClipError(f"{target}: cannot be read ({exc.strerror or exc})") from None
    if len(content) > max_bytes:
        raise ClipError(_too_big(target, max_bytes))
    name = path.name
    if content.startswith(b"%PDF-"):
        kind: Kind = "pdf"
    elif name.lower().endswith(HTML_SUFFIXES):
        kind = "html"
    else:
        kind = _kind_of(target, "", name, content)
    url = path.resolve().as_uri()
    return Download(url, url, content, kind, name)


def _too_big(target: str, max_bytes: int, size: int | None = None) -> str:
    got = f" ({size:,} bytes)" if size is not None else ""
    return (
        f"{target}: larger than [clip] max_bytes = {max_bytes:,}{got}; raise [clip] max_bytes "
        "if it is really that large"
    )
