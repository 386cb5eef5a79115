"""S3 servers on 127.0.0.1 for the object-storage tests.

``moto_server`` is moto's real S3 (and DynamoDB) server, which honours conditional
writes (``If-None-Match`` / ``If-Match``) as AWS S3 does. ``ConditionIgnoringProxy``
is a STAND-IN for an S3-compatible store that ignores them: a plain HTTP proxy in
front of moto that drops those headers, so every conditional PUT succeeds.
"""

from __future__ import annotations

import http.client
import logging
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
}
_CONDITIONS = {"if-none-match", "if-match"}
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def env(self) -> dict[str, str]:
        """The AWS_* variables that point a process at this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def client(self) -> object:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, **_boto_credentials())

    def bucket(self, name: str) -> str:
        self.client().create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return name


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_REGION"],
    }


@pytest.fixture(scope="session")
def moto_server() -> Iterator[S3Server]:
    """moto's S3 server on a free port of 127.0.0.1, for the whole session."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.stop()


@pytest.fixture()
def s3_env(moto_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """This process's AWS_* variables pointing at the moto server."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in moto_server.env().items():
        monkeypatch.setenv(name, value)
    return moto_server


class ConditionIgnoringProxy:
    """STAND-IN for an S3-compatible store that ignores conditional writes: forwards
    every request to ``upstream`` (moto) without its If-None-Match / If-Match headers."""

    def __init__(self, upstream: str):
        host, port = upstream.removeprefix("http://").split(":")
        target = (host, int(port))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                if "chunked" in self.headers.get("Transfer-Encoding", ""):
                    body = self._chunked_body()
                else:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(length) if length else None
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in _CONDITIONS | _HOP_BY_HOP
                }
                conn = http.client.HTTPConnection(*target, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    reply = conn.getresponse()
                    data = reply.read()
                finally:
                    conn.close()
                self.send_response(reply.status, reply.reason)
                head = self.command == "HEAD"  # its Content-Length is the object's
                for k, v in reply.getheaders():
                    if k.lower() not in _HOP_BY_HOP | (set() if head else {"content-length"}):
                        self.send_header(k, v)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _chunked_body(self) -> bytes:
                parts = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()  # the blank line after the last chunk
                return b"".join(parts)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> S3Server:
        self._thread.start()
        return S3Server(self.endpoint)

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def subprocess_env(server: S3Server) -> dict[str, str]:
    """This process's environment with the AWS_* variables of ``server``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, **server.env()}
