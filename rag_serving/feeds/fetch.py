"""Fetching one feed: httpx with timeouts, a size cap, redirects, a named user agent
and conditional requests (``If-None-Match`` / ``If-Modified-Since`` → 304); local
paths and ``file://`` URLs are read directly (their mtime stands in for
``Last-Modified``).

feedparser's own fetcher is not used: it has no timeout, so one dead host would hold
a run forever.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from email.utils import formatdate
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx

ACCEPT = (
    "application/atom+xml, application/rss+xml, application/feed+json, "
    "application/json;q=0.9, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.5"
)
MAX_REDIRECTS = 5
# The whole body must arrive within this many read timeouts: a server trickling a
# byte at a time would otherwise never hit the per-read timeout.
BODY_DEADLINE_FACTOR = 4


class FetchError(Exception):
    """A feed that cannot be fetched now; ``str(e)`` is one line naming the URL and
    what to do."""


@dataclass(frozen=True)
class Fetched:
    """A fetch's outcome: ``content`` is None when the feed is unchanged (304)."""

    url: str  # after redirects
    status: int
    content: bytes | None
    headers: dict[str, str] = field(default_factory=dict)
    etag: str | None = None
    last_modified: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.content is None


def is_local(url: str) -> bool:
    """Whether ``url`` is a local path or a ``file://`` URL."""
    return "://" not in url or url.lower().startswith("file://")


def local_path(url: str) -> Path:
    if url.lower().startswith("file://"):
        return Path(unquote(urlsplit(url).path))
    return Path(url)


def fetch_feed(
    url: str,
    *,
    etag: str | None = None,
    last_modified: str | None = None,
    timeout: float = 20.0,
    max_bytes: int = 10_000_000,
    user_agent: str = "ragline-feeds/1",
    client: httpx.Client | None = None,
) -> Fetched:
    """Fetch ``url`` once, conditionally when validators are given; raises
    ``FetchError``."""
    if is_local(url):
        return _read_local(url, last_modified, max_bytes)
    own = client is None
    if client is None:
        client = make_client(timeout, user_agent)
    headers = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    try:
        with client.stream("GET", url, headers=headers) as response:
            return _read_response(url, response, timeout, max_bytes)
    except httpx.TooManyRedirects:
        raise FetchError(
            f"{url}: more than {MAX_REDIRECTS} redirects; open it in a browser and use the "
            "address it ends at"
        ) from None
    except httpx.TimeoutException:
        raise FetchError(
            f"{url}: no answer within {timeout:g} s; the site may be down (retried at the "
            "next poll), or raise timeout_seconds"
        ) from None
    except httpx.HTTPError as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise FetchError(
            f"{url}: cannot connect ({reason}); check the URL and the network "
            "(retried at the next poll)"
        ) from None
    finally:
        if own:
            client.close()


def make_client(timeout: float, user_agent: str) -> httpx.Client:
    """A client for a run's fetches (connections are reused across feeds)."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout),
        follow_redirects=True,
        max_redirects=MAX_REDIRECTS,
        headers={"User-Agent": user_agent, "Accept": ACCEPT},
    )


def _read_response(url: str, response: httpx.Response, timeout: float, max_bytes: int) -> Fetched:
    final = str(response.url)
    headers = {k.lower(): v for k, v in response.headers.items()}
    if response.status_code == 304:
        return Fetched(final, 304, None, headers, headers.get("etag"), headers.get("last-modified"))
    if response.status_code >= 400:
        raise FetchError(f"{url}: {_http_advice(response.status_code, response.reason_phrase)}")
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchError(_too_big(url, max_bytes, int(declared)))
    deadline = time.monotonic() + timeout * BODY_DEADLINE_FACTOR
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise FetchError(_too_big(url, max_bytes))
        if time.monotonic() > deadline:
            raise FetchError(
                f"{url}: the feed took longer than {timeout * BODY_DEADLINE_FACTOR:g} s to "
                "download; the site may be overloaded (retried at the next poll), or raise "
                "timeout_seconds"
            )
        chunks.append(chunk)
    return Fetched(
        final,
        response.status_code,
        b"".join(chunks),
        headers,
        headers.get("etag"),
        headers.get("last-modified"),
    )


def _http_advice(status: int, reason: str) -> str:
    what = f"HTTP {status} {reason}".strip()
    if status == 404:
        return f"{what}; check the URL (the feed may have moved)"
    if status == 410:
        return f"{what}; the feed was removed: remove it from the source"
    if status in (401, 403):
        return f"{what}; the site refuses the request (a private feed needs its token in the URL)"
    if status == 429:
        return f"{what}; the site limits requests: raise poll_minutes for this feed"
    if status >= 500:
        return f"{what}; a server error (retried at the next poll)"
    return f"{what}; check the URL"


def _too_big(url: str, max_bytes: int, size: int | None = None) -> str:
    got = f" ({size:,} bytes)" if size is not None else ""
    return (
        f"{url}: the response is larger than max_feed_bytes = {max_bytes:,}{got}; raise "
        "max_feed_bytes if the feed is really that large"
    )


def _read_local(url: str, last_modified: str | None, max_bytes: int) -> Fetched:
    path = local_path(url)
    try:
        stat = path.stat()
        stamp = formatdate(stat.st_mtime, usegmt=True) + f" {stat.st_mtime_ns}-{stat.st_size}"
        if last_modified == stamp:
            return Fetched(url, 304, None, {}, None, stamp)
        if stat.st_size > max_bytes:
            raise FetchError(_too_big(str(path), max_bytes, stat.st_size))
        data = path.read_bytes()
    except FileNotFoundError:
        raise FetchError(f"{path}: no such feed file; check the path") from None
    except IsADirectoryError:
        raise FetchError(f"{path}: is a folder; give the feed file itself") from None
    except OSError as exc:
        raise FetchError(f"{path}: cannot read the feed file ({exc.strerror})") from None
    return Fetched(url, 200, data, {}, None, stamp)
