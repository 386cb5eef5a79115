"""HTML pages with selectolax (lexbor).

One DOM walk: headings become markdown ``#`` lines; paragraphs, list items (``- ``),
``<pre>`` (fenced) and table rows (``a | b``) become blocks; inline elements join
without spurious spaces and ``<br>`` breaks lines. The page's ``<main>`` /
``<article>`` is read when it has one; scripts, styles, navigation, headers,
footers, asides, hidden elements and (on pages without those landmarks) elements
whose class or id names a menu, sidebar or breadcrumb are dropped.

trafilatura was measured and not used: on 331 local pages without landmarks it
kept 90-100 % of this text (little boilerplate was left), ran 15x slower, escaped
markdown characters inside words (``Z\\_OK``) and dropped prose and headings
around code listings. HTML has no pages: no sections, the chunker cites headings.
EPUB chapters reuse this extractor (``html_text``).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from html.entities import html5 as html5_entities
from pathlib import Path
from typing import Any

from rag_sources.charsets import decode_declared, markup_charset
from rag_sources.formats.html_head import head_metadata
from rag_sources.formats.model import ItemError, ItemSkipped, ParsedDocument, ParseOptions
from rag_sources.formats.text import (
    BINARY_SNIFF_BYTES,
    cap_text,
    heading_line,
    markdown_safe,
)
from rag_sources.limits import DEFAULT_LIMITS

__all__ = ["HtmlText", "decode_html", "html_text", "parse_html"]

# class / id tokens of menus and other chrome on pages without landmarks
_CHROME_TOKENS = frozenset(
    {
        "nav", "navbar", "navigation", "menu", "mainmenu", "sidebar", "side-bar",
        "breadcrumb", "breadcrumbs", "cookie", "cookies", "cookie-banner", "skip-link",
        "skiplink", "site-header", "site-footer", "footer", "header", "masthead",
        "share", "social", "related", "advert", "advertisement", "ads",
    }
)  # fmt: skip
# an element holding more than this share of the page's text is content, whatever its name
_CHROME_MAX_SHARE = 0.5

_SKIP_TAGS = frozenset(
    {
        "script", "style", "noscript", "template", "head", "title", "meta", "link",
        "iframe", "object", "embed", "canvas", "svg", "button", "select", "option",
        "textarea", "input", "annotation-xml", "rt", "rp",
    }
)  # fmt: skip
_BOILERPLATE_TAGS = ("nav", "aside", "footer", "header")
_BOILERPLATE_ATTRS = (
    '[hidden], [aria-hidden="true"], [role="navigation"], [role="banner"], '
    '[role="contentinfo"], [role="complementary"], [role="search"], [role="dialog"]'
)
_BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "caption", "center", "dd",
        "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure",
        "footer", "form", "header", "hgroup", "hr", "html", "legend", "li", "main", "menu",
        "nav", "ol", "p", "section", "summary", "tbody", "td", "tfoot", "th", "thead", "tr",
        "ul", "table",
    }
)  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_INSIDE_TABLE = ", ".join(f"table {tag}" for tag in ("table", *_HEADINGS, "pre"))


@dataclass
class HtmlText:
    """What the structural extractor found in one HTML document."""

    blocks: list[str] = field(default_factory=list)
    headings: list[tuple[int, str]] = field(default_factory=list)
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    landmark: bool = False  # the text came from <main> / <article>
    warnings: list[str] = field(default_factory=list)  # e.g. nesting read as plain text
    heading_blocks: list[int] = field(default_factory=list)  # block of each heading
    # (block, id) where each marked element starts, in document order: the text from
    # that block on is the element's (``html_text(marks=...)``)
    breaks: list[tuple[int, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(self.blocks)


# ---------------------------------------------------------------------------
# decoding


def decode_html(data: bytes, warnings: list[str]) -> str:
    """HTML bytes as text, as browsers read them: a BOM, then the declared charset
    (``<?xml encoding>``, ``<meta charset>``; WHATWG labels, so gb2312 reads as GB18030),
    else UTF-8, with bad bytes replaced. A declaration that the bytes contradict while
    they are valid UTF-8 is stale: the page is read as UTF-8, with a warning saying so
    (``rag_sources.charsets``)."""
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace")
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise ItemSkipped("binary content (NUL bytes); not an HTML file")
    decoded = decode_declared(data, markup_charset(data), what="the page")
    if decoded.warning:
        warnings.append(decoded.warning)
    return decoded.text


# ---------------------------------------------------------------------------
# bounding the input: internal DTD subsets and nesting depth

_DOCTYPE = re.compile(r"<!DOCTYPE\b", re.IGNORECASE)
_ELEMENT_START = re.compile(r"<[A-Za-z]")
_ENTITY_DECLARATION = re.compile(r"<!ENTITY\s+([^\s%][^\s]*)")
_ENTITY_REFERENCE = re.compile(r"&([A-Za-z_:][\w.:-]*);")


def _strip_internal_subset(html: str) -> str:
    """``html`` without the internal subset of its DOCTYPE (``<!DOCTYPE html [ ... ]>``).

    XHTML (EPUB chapters above all) may declare entities there; an HTML parser ends
    the DOCTYPE at its first ``>`` and reads the rest of the subset, ``]>`` and the
    references to those entities as text. The subset is cut out, and references to
    entities it declared are dropped unless HTML knows the name (``&nbsp;``): never
    expanded, so an external entity (XXE) is never read and nested ones (billion
    laughs) never multiply.
    """
    m = _DOCTYPE.search(html)
    if m is None or _ELEMENT_START.search(html, 0, m.start()):
        return html
    i, n = m.end(), len(html)
    quote = ""
    while i < n:  # to the subset's "[" (or the DOCTYPE's end), past quoted ids
        c = html[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c == ">":
            return html  # no internal subset
        elif c == "[":
            break
        i += 1
    else:
        return html
    opening = i
    i += 1
    while i < n:  # to the subset's "]", past quoted values, comments and PIs
        c = html[i]
        if c in "\"'":
            close = html.find(c, i + 1)
            i = n if close < 0 else close + 1
        elif html.startswith("<!--", i):
            close = html.find("-->", i + 4)
            i = n if close < 0 else close + 3
        elif html.startswith("<?", i):
            close = html.find("?>", i + 2)
            i = n if close < 0 else close + 2
        elif c == "]":
            break
        else:
            i += 1
    subset = html[opening + 1 : i]
    rest = html.find(">", i)
    if rest < 0:
        return html[:opening] + ">"
    declared = {
        name for name in _ENTITY_DECLARATION.findall(subset) if f"{name};" not in html5_entities
    }
    body = html[rest + 1 :]
    if declared:
        body = _ENTITY_REFERENCE.sub(lambda r: "" if r.group(1) in declared else r.group(0), body)
    return html[:opening].rstrip() + ">" + body


# Elements the nesting count ignores: void ones, and those whose start closes an open
# one of their kind (a list item, a cell, a paragraph), so they never pile up.
_VOID_TAGS = frozenset(
    {
        "area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "image",
        "img", "input", "keygen", "link", "meta", "param", "source", "track", "wbr",
    }
)  # fmt: skip
_SELF_CLOSING_KIN = frozenset(
    {
        "body", "caption", "colgroup", "dd", "dt", "head", "html", "li", "optgroup",
        "option", "p", "rb", "rp", "rt", "rtc", "tbody", "td", "tfoot", "th", "thead", "tr",
    }
)  # fmt: skip
# One token of the scan: a comment, an element whose content is raw text (skipped
# whole), or a start / end tag (name captured).
_MARKUP = re.compile(
    r"<!--.*?(?:-->|\Z)"
    r"|<(script|style|textarea|title|xmp|iframe|noembed|noframes|noscript)\b[^>]*>"
    r".*?(?:</\1[\s/>][^>]*>|\Z)"
    r"|<(/?)([A-Za-z][^\t\n\f\r />]*)[^>]*>",
    re.DOTALL | re.IGNORECASE,
)
# A parser's worst case below this many tags is a fraction of a second: not scanned.
_SCAN_MIN_TAGS = 16_384


def cap_depth(html: str, max_depth: int) -> tuple[str, int]:
    """``html`` with the tags of elements nested deeper than ``max_depth`` removed
    (their text kept); returns (html, tags removed).

    An HTML parser's tree building checks the open elements for every start tag, so
    its time grows with depth × tags (200,000 nested divs: minutes). This linear scan
    follows start and end tags the way the parser pairs them, closely enough to
    bound what it will build; a document within the cap comes back unchanged. (The
    extractor still flattens whatever the parser nests deeper, ``_Walker``.)
    """
    if html.count("<") <= max(max_depth, _SCAN_MIN_TAGS):
        return html, 0
    stack: list[tuple[str, bool]] = []  # open elements: (name, tag removed)
    open_count: dict[str, int] = {}
    depth = 0
    cut: list[tuple[int, int]] = []
    for m in _MARKUP.finditer(html):
        name = m.group(3)
        if name is None:  # a comment or a raw-text element
            continue
        name = name.lower()
        if m.group(2):  # an end tag closes up to the open element of its name
            if open_count.get(name):
                while stack:
                    popped, removed = stack.pop()
                    open_count[popped] -= 1
                    depth -= not removed
                    if popped == name:
                        if removed:
                            cut.append(m.span())
                        break
        elif name not in _VOID_TAGS and name not in _SELF_CLOSING_KIN:
            if name == "plaintext":
                break
            removed = depth >= max_depth
            if removed:
                cut.append(m.span())
            else:
                depth += 1
            stack.append((name, removed))
            open_count[name] = open_count.get(name, 0) + 1
    if not cut:
        return html, 0
    parts: list[str] = []
    last = 0
    for begin, end in cut:
        parts.append(html[last:begin])
        parts.append(" ")  # a removed block tag still parts words
        last = end
    parts.append(html[last:])
    return "".join(parts), len(cut)


# ---------------------------------------------------------------------------
# structural extraction


def _clean_inline(pieces: list[str]) -> list[str]:
    lines = "".join(pieces).split("\n")
    return [markdown_safe(" ".join(line.split())) for line in lines if line.strip()]


def _layout_tables(root: Any) -> set[int]:
    """Tables laying out a page (holding a table, a heading or code) rather than data.

    Each table, heading and ``<pre>`` marks its ancestors, stopping at one already
    marked: every element is visited once, however deep the tables nest.
    """
    layout: set[int] = set()
    seen: set[int] = set()
    for inner in root.css(_INSIDE_TABLE):
        node = inner.parent
        while node is not None and node.mem_id not in seen:
            seen.add(node.mem_id)
            if node.tag == "table":
                layout.add(node.mem_id)
            node = node.parent
    return layout


# Nested menu-named elements that each hold most of the page are measured up to this
# many deep on one path (each measure reads the element's text); deeper ones are content.
_CHROME_CHAIN = 8

# stack entries: what to do with a node
_ENTER, _LEAVE_BLOCK, _LEAVE_HEADING, _LEAVE_SPACE = range(4)


class _Walker:
    """Iterative DOM walk in one pass: each node is visited once (deep nesting must not
    hit Python's recursion limit nor cost depth × nodes)."""

    def __init__(
        self,
        skip: set[int],
        layout: set[int],
        max_depth: int,
        chrome: set[int] | None = None,
        chrome_total: int = 0,
        marks: dict[int, list[str]] | None = None,
    ) -> None:
        self.skip = skip
        self.marks = marks or {}  # element → the ids that start a part there
        self.breaks: list[tuple[int, str]] = []
        self.heading_blocks: list[int] = []
        self.layout = layout
        self.max_depth = max_depth
        self.chrome = chrome or set()  # menu-named elements, dropped when they hold little
        self.chrome_total = chrome_total
        self.blocks: list[str] = []
        self.headings: list[tuple[int, str]] = []
        self.pieces: list[str] = []
        self.prefix = ""
        self.heading = 0  # level of the heading being read (0: none)
        self.flattened = False  # content deeper than max_depth was read as plain text

    def flush(self) -> None:
        lines = _clean_inline(self.pieces)
        self.pieces = []
        if lines:
            text = "\n".join(lines)
            if self.prefix:
                text = self.prefix + text.replace("\n", "\n  ")
            self.blocks.append(text)
            self.prefix = ""  # a list item's marker goes on its first block only

    def end_heading(self) -> None:
        text = " ".join("".join(self.pieces).split())
        self.pieces = []
        level, self.heading = self.heading, 0
        line = heading_line(level, markdown_safe(text))
        if line:
            self.heading_blocks.append(len(self.blocks))
            self.blocks.append(line)
            self.headings.append((level, line.lstrip("#").strip()))

    def is_chrome(self, node: Any) -> bool:
        """A menu-named element holding a minor part of the page's text."""
        return len(node.text(deep=True) or "") <= self.chrome_total * _CHROME_MAX_SHARE

    def walk(self, root: Any, depth: int = 0) -> None:
        # (node, depth, action, menu-named ancestors kept as content)
        stack: list[tuple[Any, int, int, int]] = [(root, depth, _ENTER, 0)]
        while stack:
            node, depth, action, chain = stack.pop()
            tag = node.tag
            if action == _LEAVE_HEADING:
                self.end_heading()
                continue
            if action == _LEAVE_SPACE:
                self.pieces.append(" ")
                continue
            if action == _LEAVE_BLOCK:
                self.flush()
                if tag == "li":
                    self.prefix = ""
                continue
            if tag == "-text":
                self.pieces.append(node.text_content or "")
                continue
            if self.marks and node.mem_id in self.marks:
                if not self.heading:  # inside a heading the part starts at the heading
                    self.flush()
                self.breaks.extend((len(self.blocks), i) for i in self.marks.pop(node.mem_id))
            if not node.is_element_node or tag in _SKIP_TAGS or node.mem_id in self.skip:
                continue
            if node.mem_id in self.chrome and chain < _CHROME_CHAIN:
                if self.is_chrome(node):
                    continue
                chain += 1
            if tag == "br":
                self.pieces.append(" " if self.heading else "\n")
                continue
            if depth >= self.max_depth or self.heading:
                # Inside a heading, or too deep: plain text, words kept apart.
                self.flattened = self.flattened or depth >= self.max_depth
                if tag in _BLOCK_TAGS or tag in _HEADINGS or tag == "pre":
                    self.pieces.append(" ")
                    stack.append((node, depth, _LEAVE_SPACE, chain))
            elif tag in _HEADINGS:
                self.flush()
                self.heading = _HEADINGS[tag]
                stack.append((node, depth, _LEAVE_HEADING, chain))
            elif tag == "pre":
                self.flush()
                self.pre(node)
                continue
            elif tag == "table" and node.mem_id not in self.layout:
                self.flush()
                self.table(node, depth)
                continue
            elif tag in _BLOCK_TAGS:
                self.flush()
                if tag == "li":
                    self.prefix = "- "
                stack.append((node, depth, _LEAVE_BLOCK, chain))
            children = []
            child = node.child
            while child is not None:
                children.append(child)
                child = child.next
            stack.extend((c, depth + 1, _ENTER, chain) for c in reversed(children))

    def inline_text(self, node: Any, depth: int) -> str:
        """Text of ``node`` on one line, blocks inside it joined by spaces."""
        inner = _Walker(self.skip, self.layout, self.max_depth, self.chrome, self.chrome_total)
        inner.walk(node, depth)
        inner.flush()
        self.flattened = self.flattened or inner.flattened
        return " ".join(" ".join(inner.blocks).split())

    def pre(self, node: Any) -> None:
        text = (node.text(deep=True) or "").strip("\n")
        if not text.strip():
            return
        lines = [line.rstrip() for line in text.split("\n")]
        if any(line.lstrip().startswith("```") for line in lines):
            self.blocks.append("\n".join(markdown_safe(x) for x in lines if x.strip()))
        else:
            self.blocks.append("```\n" + "\n".join(lines) + "\n```")

    def table(self, node: Any, depth: int) -> None:
        # A data table holds no table, heading or <pre> (those make it layout): its
        # rows are its own and its cells are disjoint, so each node is read once.
        rows: list[str] = []
        for tr in node.css("tr"):
            cells = [self.inline_text(cell, depth + 3) for cell in tr.css("th, td")]
            if any(cells):
                rows.append(markdown_safe(" | ".join(cells)))
        if rows:
            self.blocks.append("\n".join(rows))


def _chrome_candidates(root: Any) -> set[int]:
    """Elements named like menus (class / id), the page's landmarks excepted."""
    found: set[int] = set()
    for node in root.css("[class], [id]"):
        attrs = node.attributes
        tokens = {t.lower() for t in (attrs.get("class") or "").split()}
        tokens.add((attrs.get("id") or "").lower())
        if tokens & _CHROME_TOKENS and node.tag not in ("body", "html", "main", "article"):
            found.add(node.mem_id)
    return found


def _marked(root: Any, ids: set[str], layout: set[int]) -> dict[int, list[str]]:
    """The elements under ``root`` carrying one of ``ids`` (``id``, or ``name`` of an
    ``<a>``), each id's first only. An element the walk reads whole (inside a data
    table, a ``<pre>`` or a skipped element) marks that outermost one instead."""
    found: dict[int, list[str]] = {}
    for node in root.css("[id], a[name]"):
        attrs = node.attributes
        for value in (attrs.get("id"), attrs.get("name") if node.tag == "a" else None):
            if not value or value not in ids:
                continue
            ids.discard(value)
            target, up = node, node.parent
            while up is not None and up.mem_id != root.mem_id:
                if (
                    up.tag == "pre"
                    or up.tag in _SKIP_TAGS
                    or (up.tag == "table" and up.mem_id not in layout)
                ):
                    target = up
                up = up.parent
            found.setdefault(target.mem_id, []).append(value)
        if not ids:
            break
    return found


def html_text(
    html: str,
    boilerplate: bool = True,
    *,
    max_depth: int | None = None,
    marks: Collection[str] = (),
) -> HtmlText:
    """Structural text of an HTML document.

    With ``boilerplate`` (web pages), ``<main>``/``<article>`` is preferred and
    navigation, headers, footers, asides and hidden elements are dropped; without
    it (EPUB chapters, mail bodies, feed entries) everything in ``<body>`` except
    scripts and styles is kept. Elements nested deeper than ``max_depth`` (default
    ``[limits] max_nesting_depth``) are read as plain text, with a warning in
    ``HtmlText.warnings``. ``marks``: ids (or ``<a name>``) of elements where a part
    of the text starts (an EPUB table of contents' targets): the text is broken into
    blocks there and ``HtmlText.breaks`` says where each one found starts.
    """
    from selectolax.lexbor import LexborHTMLParser

    limit = DEFAULT_LIMITS.max_nesting_depth if max_depth is None else max(1, max_depth)
    html, removed = cap_depth(_strip_internal_subset(html), limit)
    tree = LexborHTMLParser(html)
    result = HtmlText(metadata=head_metadata(tree))
    title_node = tree.css_first("head > title") or tree.css_first("title")
    title = " ".join((title_node.text() or "").split()) if title_node is not None else ""
    root = tree.body if tree.body is not None else tree.root
    skip: set[int] = set()
    chrome: set[int] = set()
    if boilerplate and root is not None:
        landmark = tree.css_first("main, [role=main]") or tree.css_first("article")
        if landmark is not None:
            root = landmark
            result.landmark = True
        # Inside <main>/<article> a <header> holds the title: keep it there.
        drop = ("nav", "aside", "footer") if result.landmark else _BOILERPLATE_TAGS
        for node in root.css(", ".join(drop) + ", " + _BOILERPLATE_ATTRS):
            skip.add(node.mem_id)
        if not result.landmark:
            chrome = _chrome_candidates(root)
    if root is None:
        return result
    total = len(root.text(deep=True) or "") if chrome else 0
    layout = _layout_tables(root)
    marked = _marked(root, set(marks), layout) if marks else {}
    walker = _Walker(skip, layout, limit, chrome, total, marked)
    walker.walk(root)
    walker.flush()
    result.blocks = walker.blocks
    result.headings = walker.headings
    result.heading_blocks = walker.heading_blocks
    result.breaks = walker.breaks
    first_h1 = next((text for level, text in walker.headings if level == 1), None)
    result.title = title or first_h1
    if removed or walker.flattened:
        result.warnings.append(
            f"elements nested deeper than {limit:,} levels read as plain text "
            "([limits] max_nesting_depth)"
        )
    return result


def parse_html(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """Parse one HTML page: main text with markdown headings, title and metadata."""
    try:
        data = full_path.read_bytes()
    except OSError as exc:
        raise ItemError(f"cannot read the file ({exc.strerror}); check its permissions") from None
    if not data.strip():
        raise ItemSkipped("empty file")
    warnings: list[str] = []
    html = decode_html(data, warnings)
    extracted = html_text(html, max_depth=options.limits.max_nesting_depth)
    warnings.extend(extracted.warnings)
    body = extracted.text
    metadata = dict(extracted.metadata)
    if not body.strip():
        raise ItemSkipped("no text in the page")
    body = cap_text(body, options, warnings)
    return ParsedDocument(
        body=body.rstrip("\n") + "\n",
        title=extracted.title,
        metadata=metadata,
        warnings=tuple(warnings),
    )
