"""Feed autodiscovery: telling a web page from a feed, and the feeds a page names.

A subscription list often holds a site's page instead of its feed. Feed readers
then read the page's ``<link rel="alternate" type="application/rss+xml"
href="…">`` (or ``atom+xml``, ``feed+json``; RSS Advisory Board's autodiscovery,
the JSON Feed spec) and subscribe to that. Only http(s) links are kept: a page may
not lead to a local file. The fetch of the linked feed is bounded like the page's
(``fetch_feed(reach_of=…)``: a public page may not name a feed on this machine).
"""

from __future__ import annotations

import codecs
import re
from urllib.parse import urljoin, urlsplit

from rag_sources.charsets import decode_declared, markup_charset

__all__ = ["feed_links", "is_web_page"]

FEED_TYPES = ("application/rss+xml", "application/atom+xml", "application/feed+json")
# JSON Feed 1.0 advertised itself as application/json, a type other alternates use too
# (a WordPress page links its REST API record): taken only when its title says feed.
_JSON = "application/json"
_SNIFF_BYTES = 65_536
# what may come before a document's first element: a declaration, comments,
# processing instructions, a DOCTYPE other than HTML's, whitespace
_PROLOG = re.compile(
    r"\s+|<\?.*?\?>|<!--.*?-->|<!DOCTYPE\s+(?!html\b)[^>\[]*(?:\[.*?\])?\s*>", re.S | re.I
)
_FIRST = re.compile(r"<!DOCTYPE\s+html\b|<(?:[\w-]+:)?([\w-]+)", re.I)
_FEED_ROOTS = frozenset({"rss", "feed", "rdf", "channel"})
_PAGE_TYPES = ("text/html", "application/xhtml+xml")


def _head_text(content: bytes) -> str:
    head = content[:_SNIFF_BYTES]
    for bom, codec in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
        if head.startswith(bom):
            return head[len(bom) :].decode(codec, "replace")
    return head.removeprefix(codecs.BOM_UTF8).decode("latin-1")


def is_web_page(content: bytes, content_type: str = "") -> bool:
    """Whether ``content`` is an HTML page rather than a feed: its first element (past
    the XML declaration, comments and a feed's DOCTYPE) is ``<html>`` or it opens
    with an HTML DOCTYPE; a document without one is a page when served as HTML. A
    feed served as ``text/html`` (a careless server) is still a feed."""
    text = _head_text(content)
    position = 0
    while (prolog := _PROLOG.match(text, position)) is not None and prolog.end() > position:
        position = prolog.end()
    first = _FIRST.match(text, position)
    if first is not None:
        name = (first.group(1) or "html").lower()
        if name == "html":
            return True
        if name in _FEED_ROOTS:
            return False
    return content_type.split(";")[0].strip().lower() in _PAGE_TYPES


def feed_links(content: bytes, page_url: str) -> list[str]:
    """The http(s) feeds a page names in ``<link rel="alternate">``, absolute, in the
    page's order (a site's main feed comes first, its comments feed after), each
    once, the page itself excepted."""
    from selectolax.lexbor import LexborHTMLParser

    text = decode_declared(content, markup_charset(content), what="the page").text
    tree = LexborHTMLParser(text)
    base = page_url
    declared_base = tree.css_first("base[href]")
    if declared_base is not None:
        base = urljoin(page_url, (declared_base.attributes.get("href") or "").strip())
    found: list[str] = []
    json_feeds: list[str] = []
    for link in tree.css("link[rel][href]"):
        attrs = link.attributes
        if "alternate" not in (attrs.get("rel") or "").lower().split():
            continue
        kind = (attrs.get("type") or "").split(";")[0].strip().lower()
        title = (attrs.get("title") or "").lower()
        if kind not in FEED_TYPES and not (kind == _JSON and "feed" in title):
            continue
        href = (attrs.get("href") or "").strip()
        if not href:
            continue
        url = urljoin(base, href).split("#", 1)[0]
        if urlsplit(url).scheme.lower() not in ("http", "https") or url == page_url:
            continue
        target = json_feeds if kind == _JSON else found
        if url not in found and url not in json_feeds:
            target.append(url)
    return found + json_feeds
