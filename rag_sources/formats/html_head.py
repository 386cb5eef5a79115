"""What a web page declares about itself in its head: title, author, date,
description, keywords, language and canonical URL — the first article of its
JSON-LD first, then OpenGraph / article / Dublin Core / citation ``<meta>`` tags,
then ``<link rel=canonical>`` (``og:url`` when there is none).

Read from the tree ``html_text`` already parsed (one parse per page). A JSON-LD
script over ``MAX_JSON_LD_CHARS`` is ignored; each value is one line of at most
``MAX_HEAD_VALUE_CHARS`` characters.
"""

from __future__ import annotations

import json
from typing import Any

MAX_JSON_LD_CHARS = 200_000
MAX_HEAD_VALUE_CHARS = 2000
MAX_LD_ITEMS = 50  # of a JSON-LD list or graph looked at
MAX_LD_AUTHORS = 10
_ARTICLE_TYPES = ("article", "newsarticle", "blogposting", "techarticle", "scholarlyarticle",
                  "webpage", "report", "creativework")  # fmt: skip
_META_KEYS = {
    "og:title": "title",
    "twitter:title": "title",
    "author": "author",
    "article:author": "author",
    "og:article:author": "author",
    "dc.creator": "author",
    "description": "description",
    "og:description": "description",
    "dc.description": "description",
    "keywords": "keywords",
    "article:published_time": "date",
    "og:article:published_time": "date",
    "datepublished": "date",
    "citation_publication_date": "date",
    "date": "date",
    "dc.date": "date",
    "dcterms.created": "date",
    "og:url": "og_url",
}
_LD_KEYS = (("headline", "title"), ("name", "title"), ("datePublished", "date"),
            ("url", "og_url"), ("description", "description"))  # fmt: skip


def head_metadata(tree: Any) -> dict[str, str]:
    """The page's own metadata (keys: title, author, date, description, keywords,
    language, canonical), each only when declared."""
    found = dict(_json_ld(tree))
    for meta in tree.css("meta"):
        attrs = meta.attributes
        name = (attrs.get("property") or attrs.get("name") or attrs.get("itemprop") or "").lower()
        content = _one_line(attrs.get("content") or "")
        key = _META_KEYS.get(name.strip())
        # article:author is often a profile URL; a name is what a reader wants.
        if key == "author" and content.startswith(("http://", "https://")):
            continue
        if key and content:
            found.setdefault(key, content)
    for link in tree.css("link"):
        rel = (link.attributes.get("rel") or "").lower().split()
        href = (link.attributes.get("href") or "").strip()
        if "canonical" in rel and href:
            found.setdefault("canonical", href[:MAX_HEAD_VALUE_CHARS])
    og_url = found.pop("og_url", None)
    if og_url:
        found.setdefault("canonical", og_url)
    html = tree.css_first("html")
    lang = (html.attributes.get("lang") or "").strip() if html is not None else ""
    if lang:
        found["language"] = lang[:MAX_HEAD_VALUE_CHARS]
    return found


def _one_line(text: str) -> str:
    return " ".join(text.split())[:MAX_HEAD_VALUE_CHARS]


def _json_ld(tree: Any) -> dict[str, str]:
    """Headline, author, date, URL and description of the page's first JSON-LD
    article."""
    for script in tree.css('script[type="application/ld+json"]'):
        raw = script.text(deep=True) or ""
        if len(raw) > MAX_JSON_LD_CHARS:
            continue
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        for item in _ld_items(data):
            kinds = item.get("@type")
            kinds = kinds if isinstance(kinds, list) else [kinds]
            if not any(str(k).lower() in _ARTICLE_TYPES for k in kinds):
                continue
            found: dict[str, str] = {}
            for key, target in _LD_KEYS:
                value = item.get(key)
                if isinstance(value, str) and value.strip() and target not in found:
                    found[target] = _one_line(value)
            author = _ld_author(item.get("author"))
            if author:
                found["author"] = author
            if found:
                return found
    return {}


def _ld_items(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        graph = data.get("@graph")
        items = graph if isinstance(graph, list) else [data]
    elif isinstance(data, list):
        items = data
    else:
        return []
    return [d for d in items[:MAX_LD_ITEMS] if isinstance(d, dict)]


def _ld_author(value: Any) -> str | None:
    authors = value if isinstance(value, list) else [value]
    names = []
    for author in authors[:MAX_LD_AUTHORS]:
        if isinstance(author, str):
            names.append(author)
        elif isinstance(author, dict) and isinstance(author.get("name"), str):
            names.append(author["name"])
    return _one_line(", ".join(n for n in names if n.strip())) or None
