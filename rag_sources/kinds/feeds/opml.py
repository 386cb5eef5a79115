"""OPML subscription lists (a feed reader's export) read with ElementTree.

listparser was measured and not used: a truncated file gives it 0 feeds and no
error, which would silently drop every feed's entries from the index. Here a broken
file is a one-line error naming it; nested outlines give each feed its category
path, and a feed listed twice is one feed with both categories.

An OPML file lists web feeds only: an outline whose ``xmlUrl`` is a local path
(``/etc/…``, ``../notes.xml``) or a ``file://`` URL, or any address but http(s), is
refused (listed with the reason), never read. A subscription list comes from
elsewhere (a shared export, a download); local feed files go in ``urls``.
Messages name the OPML file by its name, never its path (MCP clients read them).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from rag_sources.errors import SourceUnavailableError
from rag_sources.limits import DEFAULT_LIMITS

_WEB = re.compile(r"^https?://", re.IGNORECASE)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


@dataclass(frozen=True)
class OpmlFeed:
    url: str
    title: str | None
    categories: tuple[str, ...]  # "Tech/Linux" for a feed inside two folders
    refused: str | None = None  # why it is not fetched (not an http(s) URL)


def read_opml(path: Path, max_depth: int = DEFAULT_LIMITS.max_nesting_depth) -> list[OpmlFeed]:
    """The feeds of an OPML file, in file order, each URL once; raises
    ``SourceUnavailableError`` (one line naming the file) when it cannot be read.
    ``max_depth``: how deep outlines may nest."""
    name = path.name
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise SourceUnavailableError(
            f"{name}: not a valid OPML file ({exc}); export it from your feed reader again"
        ) from None
    except OSError as exc:
        raise SourceUnavailableError(
            f"{name}: cannot read the OPML file ({exc.strerror}); check the opml setting"
        ) from None
    body = root.find("body")
    if _local(root.tag) != "opml" or body is None:
        raise SourceUnavailableError(
            f"{name}: not an OPML file (no <opml><body>); give your feed reader's OPML export"
        )
    found: dict[str, OpmlFeed] = {}
    # depth first, in file order, without recursion: (outline, its folder path, depth)
    stack = [(child, (), 1) for child in reversed(body)]
    while stack:
        outline, folders, depth = stack.pop()
        if _local(outline.tag) != "outline":
            continue
        if depth > max_depth:
            raise SourceUnavailableError(
                f"{name}: outlines nested deeper than max_nesting_depth = {max_depth}; "
                "export your subscriptions again"
            )
        attrs = {k.lower(): v for k, v in outline.attrib.items()}
        label = " ".join((attrs.get("title") or attrs.get("text") or "").split())
        url = (attrs.get("xmlurl") or "").strip()
        if url:
            _add(found, url, label, folders, name)
        inner = (*folders, label) if label and not url else folders
        stack.extend((child, inner, depth + 1) for child in reversed(outline))
    if not found:
        raise SourceUnavailableError(
            f"{name}: the OPML file lists no feeds (no outline has an xmlUrl); export your "
            "subscriptions again"
        )
    return list(found.values())


def _add(
    found: dict[str, OpmlFeed], url: str, label: str, folders: tuple[str, ...], name: str
) -> None:
    category = "/".join(folders)
    old = found.get(url)
    if old is None:
        refused = None if _WEB.match(url) else _refusal(url, label, name)
        found[url] = OpmlFeed(url, label or None, (category,) if category else (), refused)
    elif category and category not in old.categories:
        found[url] = OpmlFeed(
            url, old.title or label or None, (*old.categories, category), old.refused
        )


def _refusal(url: str, label: str, name: str) -> str:
    """Why an outline's feed is not fetched; names neither the path it gives nor the
    server's (the OPML file's author chose it)."""
    feed = f"the feed {label[:80]!r}" if label else "a feed"
    scheme = _SCHEME.match(url)
    if scheme is None or scheme[1].lower() == "file" or len(scheme[1]) == 1:  # a drive letter
        return (
            f"{name}: {feed} is a local file, which an OPML file may not name (web feeds "
            "only), so it is not read; give a local feed file in urls"
        )
    return (
        f"{name}: {feed} has a {scheme[1].lower()[:20]!r} address; an OPML file may list "
        "web feeds (http, https) only"
    )


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""
