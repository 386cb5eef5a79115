"""One guarded HTTP GET: HTTP/1.1 with timeouts and one deadline, a size cap on the
decoded body, redirects checked hop by hop, and one-line errors worded for the caller
(a feed, a clipped page: ``Wording``).

Every fetch has its own connections (``network.GuardedBackend``): no connection is
reused by another fetch, so a server that sends more than its ``Content-Length`` can
only confuse its own fetch, and each connection's address is checked against the
reach of the URL the user gave (a public page may not redirect to 127.0.0.1). The
body is read raw and decompressed here, in bounded steps: ``Accept-Encoding: gzip``
only, one layer at most, and ``max_bytes`` caps the decoded bytes (a 6.8 kB response
stacking ``gzip, gzip`` unpacked to 4 GiB in httpx before any cap was checked).
Proxies (``HTTPS_PROXY``) are not used: the address checks must see the server's own
address, not the proxy's.
"""

from __future__ import annotations

import functools
import ssl
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus

import httpcore
import httpx

from rag_sources.net.network import (
    LOCAL,
    REACH_NAMES,
    AddressRefused,
    GuardedBackend,
    host_reach,
)

ACCEPT_ENCODING = "gzip"  # the only coding asked for, and so the only one decoded
MAX_REDIRECTS = 5
# A whole fetch (every hop: connecting, headers, body) must end within this many
# read timeouts: a server trickling a byte at a time would otherwise never hit the
# per-read timeout.
BODY_DEADLINE_FACTOR = 4
REASON_CHARS = 200  # of a server's or a library's error text kept in a message


class FetchError(Exception):
    """A URL that cannot be fetched now; ``str(e)`` is one line naming it and what to
    do; ``status``: the HTTP status of a refusing answer (404, 410…), if any."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Fetched:
    """A fetch's outcome: ``content`` is None when the resource is unchanged (304)."""

    url: str  # after redirects
    status: int
    content: bytes | None
    headers: dict[str, str] = field(default_factory=dict)
    etag: str | None = None
    last_modified: str | None = None

    @property
    def not_modified(self) -> bool:
        return self.content is None

    @property
    def media_type(self) -> str:
        """The ``Content-Type`` without its parameters, lower-cased ('' when absent)."""
        return self.headers.get("content-type", "").split(";")[0].strip().lower()


def _generic_advice(status: int) -> str | None:
    return None


@dataclass(frozen=True)
class Wording:
    """How one caller's messages name what it fetches and the settings to change."""

    thing: str = "page"  # "the page took longer than…"
    timeout_setting: str = "timeout_s"
    size_setting: str = "max_bytes"
    retry: str = ""  # what happens next on a passing failure: " (retried at the next poll)"
    # The advice for an HTTP error status (after "HTTP 404 Not Found; "); None: the default.
    status_advice: Callable[[int], str | None] = _generic_advice


def quoted(text: object) -> str:
    """Someone else's text (a server's, a library's error) as it may be stored: on
    one line, at most ``REASON_CHARS`` characters, in quotes."""
    line = " ".join(str(text).split())
    if len(line) > REASON_CHARS:
        return repr(line[:REASON_CHARS]) + "…"
    return repr(line)


def url_reach(url: str) -> int:
    """How far inside the network a fetch of ``url`` (as the user gave it) may
    connect: as far as its own host (a URL that is no web address: anywhere)."""
    configured = httpx.URL(url)
    if not configured.scheme.startswith("http"):
        return LOCAL
    return host_reach(
        configured.host, configured.port or (443 if configured.scheme == "https" else 80)
    )


def fetch_url(
    url: str,
    *,
    headers: dict[str, str],
    timeout: float,
    max_bytes: int,
    wording: Wording = Wording(),
    reach_of: str | None = None,
    reach: int | None = None,
) -> Fetched:
    """GET ``url`` over http(s); raises ``FetchError``. The fetch may connect no more
    privately than ``reach`` (a ``network`` level) or, by default, than the host of
    ``reach_of`` (the URL the user gave that led here), else of ``url`` itself."""
    what = wording
    deadline = time.monotonic() + timeout * BODY_DEADLINE_FACTOR
    sent = {**headers, "Accept-Encoding": ACCEPT_ENCODING}
    try:
        target = httpx.URL(url)
        if target.scheme not in ("http", "https"):
            raise FetchError(f"{url}: not a web address (http, https); give an http(s) URL", None)
        allowed = reach if reach is not None else url_reach(reach_of or url)
        with httpx.Client(
            transport=GuardedTransport(allowed, deadline),
            timeout=httpx.Timeout(timeout),
            headers=sent,
            follow_redirects=False,  # followed below: each hop checked, no body read
            trust_env=False,  # no proxy: the address checks must see the server's own
        ) as client:
            request = client.build_request("GET", target)
            for _ in range(MAX_REDIRECTS + 1):
                if request.url.scheme not in ("http", "https"):
                    raise FetchError(
                        f"{url}: redirected to a {request.url.scheme or 'local'} address; "
                        f"{what.thing}s are fetched over http(s) only"
                    )
                response = client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        return _read_response(url, response, max_bytes, what)
                    request = response.next_request
                finally:
                    response.close()  # a redirect's body is never read
    except AddressRefused as exc:
        raise FetchError(
            f"{url}: refused to connect to {quoted(exc.host)} ({exc.address}), a "
            f"{REACH_NAMES[exc.reach]} address, reached by a redirect or a changed DNS "
            f"answer from a {what.thing} at a {REACH_NAMES[exc.allowed]} address; a "
            f"{what.thing} may not lead into a more private network than its own"
        ) from None
    except (httpcore.TimeoutException, httpx.TimeoutException):
        if time.monotonic() >= deadline:
            raise FetchError(
                f"{url}: the {what.thing} took longer than {timeout * BODY_DEADLINE_FACTOR:g} s "
                f"to download; the site may be overloaded{what.retry}, or raise "
                f"{what.timeout_setting}"
            ) from None
        raise FetchError(
            f"{url}: no answer within {timeout:g} s; the site may be down{what.retry}, or "
            f"raise {what.timeout_setting}"
        ) from None
    except (httpcore.ProtocolError, httpx.ProtocolError) as exc:
        raise FetchError(
            f"{url}: the server broke the HTTP protocol ({_reason(exc)}); "
            f"tell the site's owner{what.retry}"
        ) from None
    except (httpcore.NetworkError, httpcore.UnsupportedProtocol, httpx.HTTPError) as exc:
        raise FetchError(
            f"{url}: cannot connect ({_reason(exc)}); check the URL and the network{what.retry}"
        ) from None
    except httpx.InvalidURL as exc:
        raise FetchError(f"{url}: not a valid URL ({_reason(exc)}); check the URL") from None
    raise FetchError(
        f"{url}: more than {MAX_REDIRECTS} redirects; open it in a browser and use the "
        "address it ends at"
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


def _read_response(url: str, response: httpx.Response, max_bytes: int, what: Wording) -> Fetched:
    final = str(response.url)
    headers = {k.lower(): v for k, v in response.headers.items()}
    status = response.status_code
    if status == 304:
        return Fetched(final, 304, None, headers, headers.get("etag"), headers.get("last-modified"))
    if status >= 400:
        raise FetchError(f"{url}: {http_advice(status, what)}", status)
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise FetchError(too_big(url, max_bytes, what, int(declared)))
    decoder = _decoder(url, headers.pop("content-encoding", ""), max_bytes, what)
    headers.pop("content-length", None)  # of the raw body, not of what is kept
    chunks: list[bytes] = []
    size = 0
    try:
        for raw in response.iter_raw():
            size += len(raw)
            if size > max_bytes:
                raise FetchError(too_big(url, max_bytes, what))
            chunks.append(decoder.feed(raw) if decoder else raw)
        if decoder:
            decoder.finish()
    except _TooBig:
        raise FetchError(too_big(url, max_bytes, what, decoded=True)) from None
    except zlib.error as exc:
        raise FetchError(
            f"{url}: the gzip-compressed response cannot be decompressed ({quoted(exc)}); "
            f"tell the site's owner{what.retry}"
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


def _decoder(url: str, coding: str, max_bytes: int, what: Wording) -> _Gunzip | None:
    """The decoder of a ``Content-Encoding`` (None: the body is not encoded)."""
    layers = [c.strip().lower() for c in coding.split(",") if c.strip().lower() != "identity"]
    layers = [c for c in layers if c]
    if not layers:
        return None
    if len(layers) > 1:
        raise FetchError(
            f"{url}: the response is compressed {len(layers)} times over "
            f"(Content-Encoding: {quoted(coding)}), as no {what.thing} is; refused"
        )
    if layers[0] not in ("gzip", "x-gzip"):
        raise FetchError(
            f"{url}: the response is compressed with {quoted(layers[0])}, which was not "
            "asked for (only gzip is); tell the site's owner"
        )
    return _Gunzip(max_bytes)


def http_advice(status: int, what: Wording) -> str:
    """``HTTP 404 Not Found; <what to do>`` for an error status."""
    # The standard reason phrase: the server's own is its text, of any length.
    try:
        status_line = f"HTTP {status} {HTTPStatus(status).phrase}"
    except ValueError:
        status_line = f"HTTP {status}"
    advice = what.status_advice(status)
    if advice is None:
        if status in (401, 403):
            advice = "the site refuses the request (it may need a login)"
        elif status == 429:
            advice = f"the site limits requests{what.retry or ': try again later'}"
        elif status >= 500:
            advice = f"a server error{what.retry or ': try again later'}"
        else:
            advice = "check the URL"
    return f"{status_line}; {advice}"


def too_big(
    url: str, max_bytes: int, what: Wording, size: int | None = None, decoded: bool = False
) -> str:
    """The message of a body over ``max_bytes`` (``size``: as declared or found)."""
    got = f" ({size:,} bytes)" if size is not None else ""
    once = " once decompressed" if decoded else ""
    return (
        f"{url}: the response is larger than {what.size_setting} = {max_bytes:,}{got}{once}; "
        f"raise {what.size_setting} if the {what.thing} is really that large"
    )
