"""Fetching one feed: the guarded HTTP GET of ``rag_sources.net`` (timeouts and one
deadline, a size cap on the decoded body, redirects checked hop by hop) with a named
user agent and conditional requests (``If-None-Match`` / ``If-Modified-Since`` →
304); local paths and ``file://`` URLs are read directly (their mtime stands in for
``Last-Modified``).

feedparser's own fetcher is not used: it has no timeout, so one dead host would hold
a run forever.
"""

from __future__ import annotations

import stat as stat_mode
from email.utils import formatdate
from pathlib import Path
from urllib.parse import unquote, urlsplit

from rag_sources.net.fetch import Fetched, FetchError, Wording, fetch_url, quoted, too_big

__all__ = ["FetchError", "Fetched", "feed_label", "fetch_feed", "is_local", "quoted"]

ACCEPT = (
    "application/atom+xml, application/rss+xml, application/feed+json, "
    "application/json;q=0.9, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.5"
)


def _feed_advice(status: int) -> str | None:
    if status == 404:
        return "check the URL (the feed may have moved)"
    if status == 410:
        return "the feed was removed: remove it from the source"
    if status in (401, 403):
        return "the site refuses the request (a private feed needs its token in the URL)"
    if status == 429:
        return "the site limits requests: raise poll_minutes for this feed"
    if status >= 500:
        return "a server error (retried at the next poll)"
    return "check the URL"


FEED_WORDING = Wording(
    thing="feed",
    timeout_setting="timeout_seconds",
    size_setting="max_feed_bytes",
    retry=" (retried at the next poll)",
    status_advice=_feed_advice,
)


def is_local(url: str) -> bool:
    """Whether ``url`` is a local path or a ``file://`` URL."""
    return "://" not in url or url.lower().startswith("file://")


def local_path(url: str) -> Path:
    if url.lower().startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    return Path(url)


def feed_label(url: str) -> str:
    """How messages name a feed: its URL, or a local feed file's name (messages are
    served to MCP clients, which must not learn the server's paths)."""
    return local_path(url).name if is_local(url) else url


def fetch_feed(
    url: str,
    *,
    etag: str | None = None,
    last_modified: str | None = None,
    timeout: float = 20.0,
    max_bytes: int = 10_000_000,
    user_agent: str = "ragline-feeds/1",
    reach_of: str | None = None,
) -> Fetched:
    """Fetch ``url`` once, conditionally when validators are given; raises
    ``FetchError``. ``reach_of``: the configured URL that led here (a web page naming
    its feed): the fetch may reach no more private a network than that one may."""
    if is_local(url):
        if reach_of is not None:  # only a configured URL is ever read from this machine
            raise FetchError(f"{url}: not a web address (http, https); refused")
        return _read_local(url, last_modified, max_bytes)
    headers = {"User-Agent": user_agent, "Accept": ACCEPT}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    return fetch_url(
        url,
        headers=headers,
        timeout=timeout,
        max_bytes=max_bytes,
        wording=FEED_WORDING,
        reach_of=reach_of,
    )


def _read_local(url: str, last_modified: str | None, max_bytes: int) -> Fetched:
    path = local_path(url)
    name = path.name  # never the whole path (see feed_label)
    try:
        stat = path.stat()
        if stat_mode.S_ISDIR(stat.st_mode):
            raise IsADirectoryError
        if not stat_mode.S_ISREG(stat.st_mode):
            raise FetchError(f"{name}: not a regular file; give the feed file itself")
        stamp = formatdate(stat.st_mtime, usegmt=True) + f" {stat.st_mtime_ns}-{stat.st_size}"
        if last_modified == stamp:
            return Fetched(url, 304, None, {}, None, stamp)
        if stat.st_size > max_bytes:
            raise FetchError(too_big(name, max_bytes, FEED_WORDING, stat.st_size))
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)  # the file may have grown since
        if len(data) > max_bytes:
            raise FetchError(too_big(name, max_bytes, FEED_WORDING))
    except FileNotFoundError:
        raise FetchError(f"{name}: no such feed file; check the path") from None
    except IsADirectoryError:
        raise FetchError(f"{name}: is a folder; give the feed file itself") from None
    except OSError as exc:
        raise FetchError(f"{name}: cannot read the feed file ({exc.strerror})") from None
    return Fetched(url, 200, data, {}, None, stamp)
