"""A real HTTP server on 127.0.0.1 (or another address of this machine) for feed
tests and the feeds benchmarks: serves registered documents with ETag and
Last-Modified, answers conditional requests with 304, can be slowed down per path,
sends raw answers (lying headers, endless or dripping bodies) where asked, and
records every request it gets. ``route`` is the hostile-input runner's
``HttpFixture`` (benchmarks/hostile)."""

from __future__ import annotations

import contextlib
import hashlib
import socket
import ssl
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import BinaryIO


@dataclass
class Served:
    body: bytes
    content_type: str = "application/rss+xml"
    modified: float = field(default_factory=time.time)
    delay_s: float = 0.0
    status: int = 200
    validators: bool = True  # send ETag / Last-Modified (and honour them)
    headers: dict[str, str] = field(default_factory=dict)  # sent as well

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body).hexdigest()[:16] + '"'

    @property
    def last_modified(self) -> str:
        return formatdate(self.modified, usegmt=True)


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    status: int


# A raw answer: the bytes sent as they are (the connection stays open, as after any
# HTTP/1.1 answer), or a function that writes to the connection and then closes it.
Raw = bytes | Callable[[BinaryIO], None]


class FeedServer:
    """``with FeedServer() as server: server.put("/a.xml", data); server.url("/a.xml")``"""

    def __init__(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> None:
        self.documents: dict[str, Served] = {}
        self.redirects: dict[str, str] = {}
        self.raw: dict[str, Raw] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                raw = server.raw.get(self.path)
                if raw is not None:
                    with server._lock:
                        server.requests.append(Request(self.path, dict(self.headers.items()), 0))
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        if callable(raw):
                            self.close_connection = True
                            raw(self.wfile)
                        else:
                            self.wfile.write(raw)
                        self.wfile.flush()
                    return
                status, body, headers = server._answer(self)
                with server._lock:  # recorded before the answer leaves
                    server.requests.append(Request(self.path, dict(self.headers.items()), status))
                _send(self, status, body, headers)

        self.httpd = _QuietServer((host, 0), Handler)
        if tls is not None:  # https://
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FeedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def base(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"{self.scheme}://{host}:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    def put(self, path: str, body: bytes, content_type: str = "application/rss+xml", **kw) -> None:
        self.documents[path] = Served(body, content_type, **kw)

    def route(
        self,
        path: str,
        body: bytes,
        headers: dict[str, str] | None = None,
        status: int = 200,
        raw: Raw | None = None,
    ) -> str:
        """Serve ``body`` at ``path`` with ``headers`` (no validators), or ``raw`` as
        the whole response; returns its URL."""
        if raw is not None:
            self.raw[path] = raw
        else:
            extra = dict(headers or {})
            kind = extra.pop("Content-Type", "application/rss+xml")
            self.documents[path] = Served(
                body, kind, status=status, validators=False, headers=extra
            )
        return self.url(path)

    def requests_for(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def _answer(self, handler: BaseHTTPRequestHandler) -> tuple[int, bytes, dict[str, str]]:
        if handler.path in self.redirects:
            return 301, b"", {"Location": self.redirects[handler.path]}
        doc = self.documents.get(handler.path)
        if doc is None:
            return 404, b"not found", {"Content-Type": "text/plain"}
        if doc.delay_s:
            time.sleep(doc.delay_s)
        if doc.status != 200:
            return doc.status, doc.body or b"error", {"Content-Type": "text/plain", **doc.headers}
        headers = {"Content-Type": doc.content_type, **doc.headers}
        if doc.validators:
            headers.update(ETag=doc.etag, **{"Last-Modified": doc.last_modified})
            if handler.headers.get("If-None-Match") == doc.etag or (
                "If-None-Match" not in handler.headers
                and handler.headers.get("If-Modified-Since") == doc.last_modified
            ):
                return 304, b"", headers
        return 200, doc.body, headers


class _QuietServer(ThreadingHTTPServer):
    """Clients that hang up (a refused feed, a connection closed unread) are no error."""

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        if status != 304 and "Content-Length" not in headers:  # a lying one is kept
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if status != 304 and body:
            handler.wfile.write(body)


def rss(title: str, *items: str) -> bytes:
    """A small RSS 2.0 feed: one entry per text (guid, title and description)."""
    entries = "".join(
        f"<item><guid>urn:{title}:{n}</guid><title>{text}</title>"
        f"<description>{text}</description></item>"
        for n, text in enumerate(items)
    )
    return (
        f"<?xml version='1.0'?><rss version='2.0'><channel><title>{title}</title>{entries}"
        "</channel></rss>"
    ).encode()


def zeros_gzip(size: int, level: int = 6) -> bytes:
    """gzip of ``size`` zero bytes (a gzip bomb: ~1,000 to 1), made in 1 MiB steps."""
    packer = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    parts = [packer.compress(block) for _ in range(size >> 20)]
    return b"".join(parts) + packer.flush()


def lan_address() -> str:
    """This machine's address on its network (not loopback): where a server stands for
    a feed on another host. The UDP socket sends nothing; it only picks a route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: any routable address will do
        address = probe.getsockname()[0]
    assert not address.startswith("127."), "this machine has no address besides loopback"
    return address


def unused_port() -> int:
    """A port nobody listens on: bound, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
