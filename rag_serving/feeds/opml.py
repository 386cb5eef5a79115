"""OPML subscription lists (a feed reader's export) read with ElementTree.

listparser was measured and not used: a truncated file gives it 0 feeds and no
error, which would silently drop every feed's entries from the index. Here a broken
file is a one-line error naming it; nested outlines give each feed its category
path, and a feed listed twice is one feed with both categories.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from rag_serving.errors import SourceUnavailableError


@dataclass(frozen=True)
class OpmlFeed:
    url: str
    title: str | None
    categories: tuple[str, ...]  # "Tech/Linux" for a feed inside two folders


def read_opml(path: Path) -> list[OpmlFeed]:
    """The feeds of an OPML file, in file order, each URL once; raises
    ``SourceUnavailableError`` (one line naming the file) when it cannot be read."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise SourceUnavailableError(
            f"{path}: not a valid OPML file ({exc}); export it from your feed reader again"
        ) from None
    except OSError as exc:
        raise SourceUnavailableError(
            f"{path}: cannot read the OPML file ({exc.strerror}); check the opml setting"
        ) from None
    body = root.find("body")
    if _local(root.tag) != "opml" or body is None:
        raise SourceUnavailableError(
            f"{path}: not an OPML file (no <opml><body>); give your feed reader's OPML export"
        )
    found: dict[str, OpmlFeed] = {}
    _walk(body, (), path.parent, found)
    if not found:
        raise SourceUnavailableError(
            f"{path}: the OPML file lists no feeds (no outline has an xmlUrl); export your "
            "subscriptions again"
        )
    return list(found.values())


def _walk(node: ET.Element, path: tuple[str, ...], base: Path, found: dict[str, OpmlFeed]) -> None:
    for outline in node:
        if _local(outline.tag) != "outline":
            continue
        attrs = {k.lower(): v for k, v in outline.attrib.items()}
        label = " ".join((attrs.get("title") or attrs.get("text") or "").split())
        url = (attrs.get("xmlurl") or "").strip()
        if url:
            if "://" not in url:  # a local feed file, relative to the OPML file
                url = str((base / url).resolve())
            category = "/".join(path)
            old = found.get(url)
            if old is None:
                found[url] = OpmlFeed(url, label or None, (category,) if category else ())
            elif category and category not in old.categories:
                found[url] = OpmlFeed(url, old.title or label or None, (*old.categories, category))
        _walk(outline, (*path, label) if label and not url else path, base, found)


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].lower()
