"""Parsing a fetched feed into entries: feedparser for RSS 0.9x/1.0/2.0 and Atom,
a short parser of our own for JSON Feed 1.0/1.1 (feedparser reads none).

Entries keep their raw content (HTML or text) and its type: the kind cleans HTML to
text when it builds the document, with the same extractor as HTML pages.

Bounds: a JSON Feed nested deeper than ``max_nesting_depth`` is refused before
``json.loads`` recurses into it (100,000 levels raise RecursionError). feedparser
reads XML through expat's events and keeps its own stack, so a deep XML feed costs
time in proportion to its size, which ``max_feed_bytes`` bounds (measured: 100,000
nested elements, 1.4 MB, 7.7 s, the same as 100,000 flat ones), and expat refuses
entity expansion bombs ("limit on input amplification factor").
"""

from __future__ import annotations

import calendar
import codecs
import html
import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import feedparser
from feedparser.datetimes import _parse_date

from rag_sources.charsets import codec_for, decode_declared
from rag_sources.kinds.feeds.discover import feed_links, is_web_page
from rag_sources.kinds.feeds.fetch import quoted
from rag_sources.limits import DEFAULT_LIMITS

_TAG = re.compile(r"<[^>]+>")
_WEB = re.compile(r"^https?://", re.IGNORECASE)
_MAIL = re.compile(r"[^@\s<>()]+@[^@\s<>()]+")
_MAIL_NAME = re.compile(r"^(?P<mail>[^@\s<>()]+@[^@\s<>()]+)\s*\((?P<name>[^)]*)\)$")
_NAME_MAIL = re.compile(r"^(?P<name>[^<]*?)\s*<(?P<mail>[^@\s<>()]+@[^@\s<>()]+)>$")
_DAY_NAME = re.compile(r"^\s*[^\W\d_]{2,12}\.?,\s*")
# A JSON string (skipped whole) or one bracket: the tokens that decide nesting depth.
_JSON_NESTING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


@dataclass
class Entry:
    """One entry as the feed gives it (dates as aware-UTC ISO strings)."""

    guid: str | None = None
    link: str | None = None
    title: str | None = None
    author: str | None = None
    author_email: str | None = None
    published: str | None = None
    updated: str | None = None
    content: str | None = None
    content_type: str = "html"  # "html" or "text"
    summary: str | None = None
    summary_type: str = "html"

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Feed:
    """A parsed feed: its title and link, its entries in feed order, and what is wrong
    with it (``problem``: nothing could be read; ``warning``: read all the same)."""

    title: str | None = None
    link: str | None = None
    format: str = ""
    entries: list[Entry] = field(default_factory=list)
    problem: str | None = None
    warning: str | None = None
    # a web page's <link rel="alternate"> feeds, first the one to read (the page is
    # then the ``problem``: the poll reads the feed instead, ``discover``)
    feed_links: list[str] = field(default_factory=list)


def parse_feed(
    content: bytes,
    headers: dict[str, str] | None,
    url: str,
    max_depth: int = DEFAULT_LIMITS.max_nesting_depth,
    base_url: str | None = None,
) -> Feed:
    """``content`` of the feed at ``url`` (as messages name it) parsed; never raises
    for bad content. ``max_depth``: how deep a JSON Feed may nest. A web page is a
    problem that names the feeds it links to (``base_url``: where it was fetched
    from, for its relative links; default ``url``)."""
    headers = headers or {}
    if _looks_like_json(content, headers.get("content-type", "")):
        return parse_json_feed(content, url, max_depth)
    if is_web_page(content, headers.get("content-type", "")):
        links = feed_links(content, base_url or url)
        if links:
            return Feed(
                problem=f"{url}: a web page, not a feed; the feed it names is {links[0]}",
                feed_links=links,
            )
        return Feed(
            problem=f"{url}: a web page, not a feed, and it names no feed (no <link "
            'rel="alternate"> to an RSS, Atom or JSON feed); list the site\'s feed address '
            "instead"
        )
    content, headers, charset_warning = _as_browsers_read(content, headers, url)
    try:
        parsed = feedparser.parse(content, response_headers=headers)
    except Exception as exc:  # a parser crash is the feed's problem
        return Feed(problem=f"{url}: the feed cannot be parsed ({_one_line(exc)})")
    feed = _from_feedparser(parsed, url)
    if charset_warning and feed.problem is None:
        feed.warning = "; ".join(w for w in (charset_warning, feed.warning) if w)
    return feed


_XML_ENCODING = re.compile(rb"""^(\s*<\?xml[^>]*?encoding\s*=\s*["'])([A-Za-z0-9_.:-]+)""")
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


def _as_browsers_read(
    content: bytes, headers: dict[str, str], url: str
) -> tuple[bytes, dict[str, str], str | None]:
    """The feed re-encoded as UTF-8 where feedparser would misread its declared
    charset (the HTTP ``charset``, else the XML declaration's): a stale declaration
    on bytes that are valid UTF-8, or a label the WHATWG table reads otherwise than
    Python's codec of that name (iso-8859-1 as windows-1252, shift_jis as windows-31j;
    ``rag_sources.charsets``). Anything else is left to feedparser, whose fallbacks
    (declared UTF-8 that is windows-1252) are kept. Returns (content, headers, warning)."""
    if content.startswith(_BOMS):
        return content, headers, None
    media, _, params = headers.get("content-type", "").partition(";")
    http = next(
        (v.strip().strip("\"'") for k, _, v in (p.partition("=") for p in params.split(";"))
         if k.strip().lower() == "charset"),
        None,
    )  # fmt: skip
    xml = _XML_ENCODING.match(content[:1024])
    declared = http or (xml.group(2).decode("ascii") if xml else None)
    codec = codec_for(declared)
    if codec is None or codec == "utf-8" or codec.startswith(("utf-16", "utf-32")):
        return content, headers, None
    try:
        python_codec = codecs.lookup(declared or "").name
    except LookupError:
        python_codec = None
    decoded = decode_declared(content, declared, what=f"{url}: the feed")
    stale = decoded.codec == "utf-8"
    if not stale and (decoded.warning or python_codec == codec):
        return content, headers, None  # feedparser reads it as well as this would
    text = decoded.text.encode("utf-8")
    if xml is not None:
        text = _XML_ENCODING.sub(rb"\1utf-8", text, count=1)
    headers = {**headers, "content-type": f"{media.strip() or 'application/xml'}; charset=utf-8"}
    return text, headers, decoded.warning if stale else None


def _looks_like_json(content: bytes, content_type: str) -> bool:
    if "json" in content_type.lower():
        return True
    return content.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def _from_feedparser(parsed: Any, url: str) -> Feed:
    info = parsed.get("feed", {})
    feed = Feed(
        title=_plain(info.get("title")),
        link=info.get("link") or None,
        format=parsed.get("version") or "",
    )
    feed_author = _author(info)
    for raw in parsed.get("entries", []):
        entry = _entry(raw, feed.format.startswith("atom"))
        if entry.author is None and entry.author_email is None:
            entry.author, entry.author_email = feed_author
        feed.entries.append(entry)
    error = parsed.get("bozo_exception") if parsed.get("bozo") else None
    if not feed.entries:
        if error is not None:
            feed.problem = (
                f"{url}: malformed feed ({_one_line(error)}), no entries could be read; "
                "tell the site's owner, or remove the feed"
            )
        elif not feed.format:
            feed.problem = (
                f"{url}: not an RSS, Atom or JSON feed (nothing of one was found); check the "
                "URL: it may be a web page that links to its feed"
            )
    elif error is not None:
        feed.warning = (
            f"{url}: malformed feed ({_one_line(error)}); its {len(feed.entries)} "
            "entries were read all the same"
        )
    return feed


def _entry(raw: Any, atom: bool) -> Entry:
    entry = Entry(
        guid=_text(dict.get(raw, "id")),
        link=_link(raw, atom),
        title=_plain(dict.get(raw, "title")),
        published=_date_of(raw, "published"),
        # dict.get: feedparser maps a missing `updated` to `published` (with a warning)
        updated=_date_of(raw, "updated"),
    )
    if not atom and entry.published is None:
        entry.published = entry.updated  # RSS 1.0's dc:date is the item's date
    entry.author, entry.author_email = _author(raw)
    contents = dict.get(raw, "content") or []
    if contents:
        best = max(contents, key=lambda c: len(c.get("value") or ""))
        entry.content = best.get("value") or None
        entry.content_type = _kind(best.get("type"))
    summary = dict.get(raw, "summary")
    if summary and summary != entry.content:
        entry.summary = summary
        entry.summary_type = _kind((dict.get(raw, "summary_detail") or {}).get("type"))
    return entry


def _link(raw: Any, atom: bool) -> str | None:
    """The entry's link. feedparser copies a guid into ``link`` when there is none;
    an RSS guid is a permalink by default and is kept, an Atom id (``urn:``, ``tag:``)
    or any id that is not a web address is not a link."""
    link = _text(dict.get(raw, "link"))
    if not link or link != _text(dict.get(raw, "id")):
        return link
    if any(item.get("href") == link for item in dict.get(raw, "links") or []):
        return link  # also given as a link of its own
    return None if atom or not _WEB.match(link) else link


def _date_of(raw: Any, name: str) -> str | None:
    parsed = _struct_iso(dict.get(raw, f"{name}_parsed"))
    text = _text(dict.get(raw, name))
    if parsed is None and text and _DAY_NAME.match(text):
        # "mer, 16 nov 2022 …": a day name feedparser does not know; the date is enough
        parsed = _struct_iso(_parse_date(_DAY_NAME.sub("", text)))
    return parsed


def _author(raw: Any) -> tuple[str | None, str | None]:
    """(name, e-mail) of an entry's or a feed's author. feedparser's split of an RSS
    author line cuts addresses with long top-level domains ("a@b.example" becomes
    "a@b.exam"), so the line itself is split here: "mail (Name)", "Name <mail>"."""
    line = " ".join((_text(dict.get(raw, "author")) or "").split())
    detail = dict.get(raw, "author_detail") or {}
    if line:
        match = _MAIL_NAME.match(line) or _NAME_MAIL.match(line)
        if match:
            return _plain(match["name"]), match["mail"].lower()
        if _MAIL.fullmatch(line):
            return None, line.lower()
        if _plain(detail.get("name")) != _plain(line):
            return _plain(line), None
    name = _plain(detail.get("name"))
    email = _text(detail.get("email"))
    return name, (email.lower() if email else None)


def _kind(mime: str | None) -> str:
    return "text" if (mime or "").lower() == "text/plain" else "html"


# ---- JSON Feed ---------------------------------------------------------------


def parse_json_feed(
    content: bytes, url: str, max_depth: int = DEFAULT_LIMITS.max_nesting_depth
) -> Feed:
    """A JSON Feed (https://jsonfeed.org/version/1.1, and 1.0's ``author``)."""
    if _json_deeper_than(content, max_depth):
        return Feed(
            problem=f"{url}: the JSON is nested deeper than max_nesting_depth = {max_depth}; "
            "tell the site's owner, or remove the feed"
        )
    try:
        data = json.loads(content.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        return Feed(
            problem=f"{url}: not valid JSON ({_one_line(exc)}); tell the site's owner, or "
            "remove the feed"
        )
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return Feed(
            problem=f"{url}: JSON without a JSON Feed 'items' list; check the URL is the feed's"
        )
    version = str(data.get("version") or "")
    feed = Feed(
        title=_plain(data.get("title")),
        link=_text(data.get("home_page_url")),
        format="json" + ("11" if version.endswith("1.1") else "10"),
    )
    feed_author = _json_author(data)
    skipped = 0
    for item in items:
        if not isinstance(item, dict):
            skipped += 1
            continue
        entry = Entry(
            guid=_text(item.get("id")),
            link=_text(item.get("url")) or _text(item.get("external_url")),
            title=_plain(item.get("title")),
            published=_iso_date(item.get("date_published")),
            updated=_iso_date(item.get("date_modified")),
            summary=_text(item.get("summary")),
            summary_type="text",
        )
        if item.get("content_html"):
            entry.content, entry.content_type = str(item["content_html"]), "html"
        elif item.get("content_text"):
            entry.content, entry.content_type = str(item["content_text"]), "text"
        entry.author, entry.author_email = _json_author(item)
        if entry.author is None:
            entry.author, entry.author_email = feed_author
        feed.entries.append(entry)
    if skipped:
        feed.warning = (
            f"{url}: {skipped} item(s) of the JSON Feed are not objects and were left out"
        )
    return feed


def _json_deeper_than(content: bytes, limit: int) -> bool:
    """Whether the JSON nests arrays and objects more than ``limit`` deep (a scan of
    its brackets outside strings, before any parser recurses)."""
    depth = 0
    for token in _JSON_NESTING.finditer(content):
        char = token[0]
        if char in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        elif char in (b"]", b"}"):
            depth -= 1
    return False


def _json_author(data: dict[str, Any]) -> tuple[str | None, str | None]:
    authors = data.get("authors")
    author = authors[0] if isinstance(authors, list) and authors else data.get("author")
    if not isinstance(author, dict):
        return None, None
    return _plain(author.get("name")), None


def _iso_date(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        parsed = _parse_date(value)  # RFC 822 and other forms seen in the wild
        return _struct_iso(parsed)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


# ---- helpers -----------------------------------------------------------------


def _struct_iso(value: Any) -> str | None:
    """feedparser's UTC ``struct_time`` as an aware ISO string."""
    if not value:
        return None
    try:
        return datetime.fromtimestamp(calendar.timegm(value), UTC).isoformat()
    except (OverflowError, ValueError, TypeError, OSError):
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _plain(value: Any) -> str | None:
    """A title as one line of text (some feeds put tags in titles)."""
    text = _text(value)
    if text is None:
        return None
    if "<" in text:
        text = html.unescape(_TAG.sub(" ", text))
    return " ".join(text.split()) or None


def _one_line(exc: BaseException) -> str:
    """A parser's error as a message may hold it (its text may quote the document)."""
    return quoted(str(exc) or type(exc).__name__)
