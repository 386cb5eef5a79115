"""Fetching one feed: HTTP/1.1 with timeouts and one deadline, a size cap on the
decoded body, redirects checked hop by hop, a named user agent and conditional
requests (``If-None-Match`` / ``If-Modified-Since`` → 304); local paths and
``file://`` URLs are read directly (their mtime stands in for ``Last-Modified``).

Every fetch has its own connections (``network.GuardedBackend``): no connection is
reused by another feed, so a server that sends more than its ``Content-Length`` can
only confuse its own fetch, and each connection's address is checked against the
configured URL's (a public feed may not redirect to 127.0.0.1). The body is read
raw and decompressed here, in bounded steps: ``Accept-Encoding: gzip`` only, one
layer at most, and ``max_feed_bytes`` caps the decoded bytes (a 6.8 kB response
stacking ``gzip, gzip`` unpacked to 4 GiB in httpx before any cap was checked).
Proxies (``HTTPS_PROXY``) are not used: the address checks must see the feed's own
address, not the proxy's.

feedparser's own fetcher is not used: it has no timeout, so one dead host would hold
a run forever.
"""

from __future__ import annotations

import functools
import ssl
import stat as stat_mode
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpcore
import httpx

from rag_sources.kinds.feeds.network import (
    LOCAL,
    REACH_NAMES,
    AddressRefused,
    GuardedBackend,
    host_reach,
)

ACCEPT = (
    "application/atom+xml, application/rss+xml, application/feed+json, "
    "application/json;q=0.9, application/xml;q=0.9, text/xml;q=0.9, */*;q=0.5"
)
ACCEPT_ENCODING = "gzip"  # the only coding asked for, and so the only one decoded
MAX_REDIRECTS = 5
# A whole fetch (every hop: connecting, headers, body) must end within this many
# read timeouts: a server trickling a byte at a time would otherwise never hit the
# per-read timeout.
BODY_DEADLINE_FACTOR = 4
REASON_CHARS = 200  # of a server's or a library's error text kept in a message


class FetchError(Exception):
    """A feed that cannot be fetched now; ``str(e)`` is one line naming the feed and
    what to do; ``status``: the HTTP status of a refusing answer (404, 410…), if any."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


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


def feed_label(url: str) -> str:
    """How messages name a feed: its URL, or a local feed file's name (messages are
    served to MCP clients, which must not learn the server's paths)."""
    return local_path(url).name if is_local(url) else url


def quoted(text: object) -> str:
    """Someone else's text (a server's, a library's error) as it may be stored: on
    one line, at most ``REASON_CHARS`` characters, in quotes."""
    line = " ".join(str(text).split())
    if len(line) > REASON_CHARS:
        return repr(line[:REASON_CHARS]) + "…"
    return repr(line)


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
    deadline = time.monotonic() + timeout * BODY_DEADLINE_FACTOR
    headers = {"User-Agent": user_agent, "Accept": ACCEPT, "Accept-Encoding": ACCEPT_ENCODING}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    try:
        target = httpx.URL(url)
        allowed = _reach(httpx.URL(reach_of) if reach_of else target)
        with httpx.Client(
            transport=GuardedTransport(allowed, deadline),
            timeout=httpx.Timeout(timeout),
            headers=headers,
            follow_redirects=False,  # followed below: each hop checked, no body read
            trust_env=False,  # no proxy: the address checks must see the feed's own
        ) as client:
            request = client.build_request("GET", target)
            for _ in range(MAX_REDIRECTS + 1):
                if request.url.scheme not in ("http", "https"):
                    raise FetchError(
                        f"{url}: redirected to a {request.url.scheme or 'local'} address; "
                        "feeds are fetched over http(s) only"
                    )
                response = client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        return _read_response(url, response, max_bytes)
                    request = response.next_request
                finally:
                    response.close()  # a redirect's body is never read
    except AddressRefused as exc:
        raise FetchError(
            f"{url}: refused to connect to {quoted(exc.host)} ({exc.address}), a "
            f"{REACH_NAMES[exc.reach]} address, reached by a redirect or a changed DNS "
            f"answer from a feed at a {REACH_NAMES[exc.allowed]} address; a feed may "
            "not lead into a more private network than its own"
        ) from None
    except (httpcore.TimeoutException, httpx.TimeoutException):
        if time.monotonic() >= deadline:
            raise FetchError(
                f"{url}: the feed took longer than {timeout * BODY_DEADLINE_FACTOR:g} s to "
                "download; the site may be overloaded (retried at the next poll), or raise "
                "timeout_seconds"
            ) from None
        raise FetchError(
            f"{url}: no answer within {timeout:g} s; the site may be down (retried at the "
            "next poll), or raise timeout_seconds"
        ) from None
    except (httpcore.ProtocolError, httpx.ProtocolError) as exc:
        raise FetchError(
            f"{url}: the server broke the HTTP protocol ({_reason(exc)}); "
            "tell the site's owner (retried at the next poll)"
        ) from None
    except (httpcore.NetworkError, httpcore.UnsupportedProtocol, httpx.HTTPError) as exc:
        raise FetchError(
            f"{url}: cannot connect ({_reason(exc)}); check the URL and "
            "the network (retried at the next poll)"
        ) from None
    except httpx.InvalidURL as exc:
        raise FetchError(f"{url}: not a valid URL ({_reason(exc)}); check the URL") from None
    raise FetchError(
        f"{url}: more than {MAX_REDIRECTS} redirects; open it in a browser and use the "
        "address it ends at"
    )


def _reach(configured: httpx.URL) -> int:
    """How far inside the network a fetch for the configured URL may connect: as far
    as its own host (a feed file on this machine: anywhere)."""
    if not configured.scheme.startswith("http"):
        return LOCAL
    return host_reach(
        configured.host, configured.port or (443 if configured.scheme == "https" else 80)
    )


class GuardedTransport(httpx.BaseTransport):
    """httpx's transport for one fetch: httpcore over ``network.GuardedBackend`` (each
    connection's address checked, every operation within the deadline), no
    connection kept once its response is closed, and bodies left as sent (they are
    decoded here, in bounded steps). httpcore's errors pass through unchanged."""

    def __init__(self, allowed: int, deadline: float) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=_ssl_context(),
            network_backend=GuardedBackend(allowed, deadline),
            max_keepalive_connections=0,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._pool.handle_request(
            httpcore.Request(
                method=request.method,
                url=httpcore.URL(
                    scheme=request.url.raw_scheme,
                    host=request.url.raw_host,
                    port=request.url.port,
                    target=request.url.raw_path,
                ),
                headers=request.headers.raw,
                content=request.stream,
                extensions=request.extensions,
            )
        )
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class _Body(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        yield from self._response.iter_stream()

    def close(self) -> None:
        self._response.close()


def _reason(exc: BaseException) -> str:
    return quoted(str(exc) or type(exc).__name__)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """httpx's certificate settings (certifi, ``SSL_CERT_FILE``), built once."""
    return httpx.create_ssl_context()


def _read_response(url: str, response: httpx.Response, max_bytes: int) -> Fetched:
    final = str(response.url)
    headers = {k.lower(): v for k, v in response.headers.items()}
    status = response.status_code
    if status == 304:
        return Fetched(final, 304, None, headers, headers.get("etag"), headers.get("last-modified"))
    if status >= 400:
        raise FetchError(f"{url}: {_http_advice(status)}", status)
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchError(_too_big(url, max_bytes, int(declared)))
    decoder = _decoder(url, headers.pop("content-encoding", ""), max_bytes)
    headers.pop("content-length", None)  # of the raw body, not of what is kept
    chunks: list[bytes] = []
    size = 0
    try:
        for raw in response.iter_raw():
            size += len(raw)
            if size > max_bytes:
                raise FetchError(_too_big(url, max_bytes))
            chunks.append(decoder.feed(raw) if decoder else raw)
        if decoder:
            decoder.finish()
    except _TooBig:
        raise FetchError(_too_big(url, max_bytes, decoded=True)) from None
    except zlib.error as exc:
        raise FetchError(
            f"{url}: the gzip-compressed response cannot be decompressed ({quoted(exc)}); "
            "tell the site's owner (retried at the next poll)"
        ) from None
    return Fetched(
        final, status, b"".join(chunks), headers, headers.get("etag"), headers.get("last-modified")
    )


class _TooBig(Exception):
    pass


class _Gunzip:
    """gzip decoding that stops once more than ``limit`` bytes came out."""

    def __init__(self, limit: int) -> None:
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._left = limit

    def feed(self, data: bytes) -> bytes:
        if self._inflate.eof:
            return b""  # bytes after the gzip stream are ignored
        # At most one byte over the limit comes out; below it, all input is consumed.
        out = self._inflate.decompress(data, self._left + 1)
        self._left -= len(out)
        if self._left < 0:
            raise _TooBig
        return out

    def finish(self) -> None:
        if not self._inflate.eof:
            raise zlib.error("the compressed body is cut short")


def _decoder(url: str, coding: str, max_bytes: int) -> _Gunzip | None:
    """The decoder of a ``Content-Encoding`` (None: the body is not encoded)."""
    layers = [c.strip().lower() for c in coding.split(",") if c.strip().lower() != "identity"]
    layers = [c for c in layers if c]
    if not layers:
        return None
    if len(layers) > 1:
        raise FetchError(
            f"{url}: the response is compressed {len(layers)} times over "
            f"(Content-Encoding: {quoted(coding)}), as no feed is; refused"
        )
    if layers[0] not in ("gzip", "x-gzip"):
        raise FetchError(
            f"{url}: the response is compressed with {quoted(layers[0])}, which was not "
            "asked for (only gzip is); tell the site's owner"
        )
    return _Gunzip(max_bytes)


def _http_advice(status: int) -> str:
    # The standard reason phrase: the server's own is its text, of any length.
    try:
        what = f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        what = f"HTTP {status}"
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


def _too_big(url: str, max_bytes: int, size: int | None = None, decoded: bool = False) -> str:
    got = f" ({size:,} bytes)" if size is not None else ""
    once = " once decompressed" if decoded else ""
    return (
        f"{url}: the response is larger than max_feed_bytes = {max_bytes:,}{got}{once}; "
        "raise max_feed_bytes if the feed is really that large"
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
            raise FetchError(_too_big(name, max_bytes, stat.st_size))
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)  # the file may have grown since
        if len(data) > max_bytes:
            raise FetchError(_too_big(name, max_bytes))
    except FileNotFoundError:
        raise FetchError(f"{name}: no such feed file; check the path") from None
    except IsADirectoryError:
        raise FetchError(f"{name}: is a folder; give the feed file itself") from None
    except OSError as exc:
        raise FetchError(f"{name}: cannot read the feed file ({exc.strerror})") from None
    return Fetched(url, 200, data, {}, None, stamp)
