"""Where a fetch (a feed, a clipped page) may connect, and for how long.

A server chooses where its redirects lead, and its DNS chooses where its name
points. Neither may lead a fetch to an address more internal than the one the user
gave: a URL at a public address may not reach this machine's loopback (127.0.0.1,
::1), a link-local address (169.254.169.254 holds cloud credentials) or a private
network; a URL at a private-network address (a NAS on the LAN) may not reach
loopback or link-local; a URL on this machine may reach anything.

The check is made when each connection is opened, on the addresses the name
resolves to then, and the socket is connected to the address that was checked: a
name that resolves to a public address when the URL is looked at and to 127.0.0.1
when it is connected (DNS rebinding) is refused like a redirect to 127.0.0.1.

Every read, write and handshake of one fetch also stops at one deadline, so a
server that drips a byte at a time (headers included) cannot hold a run.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import time
from typing import Any

import httpcore

# How far inside a network an address lies; a fetch may reach its own level and below.
PUBLIC, PRIVATE, LOCAL = 0, 1, 2
REACH_NAMES = {
    PUBLIC: "public",
    PRIVATE: "private-network",
    LOCAL: "loopback, link-local or reserved",
}


def address_reach(address: str) -> int:
    """``LOCAL`` for loopback, link-local, unspecified, multicast and reserved
    addresses, ``PUBLIC`` for globally routable ones, ``PRIVATE`` for the rest
    (RFC 1918, shared CGNAT space, unique-local IPv6, documentation ranges…)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast:
        return LOCAL
    if ip.is_reserved:
        return LOCAL
    return PUBLIC if ip.is_global else PRIVATE


def host_reach(host: str, port: int) -> int:
    """The reach of a configured URL's host: the most internal of the addresses it
    resolves to now (a name that does not resolve is public: its fetch fails anyway)."""
    try:
        return max(address_reach(ip) for ip in _resolve(host, port))
    except (OSError, ValueError):
        return PUBLIC


class AddressRefused(Exception):
    """A connection the fetch's reach does not allow."""

    def __init__(self, host: str, address: str, reach: int, allowed: int) -> None:
        super().__init__(f"{host} ({address}) is a {REACH_NAMES[reach]} address")
        self.host, self.address, self.reach, self.allowed = host, address, reach, allowed


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's network backend for one fetch: each connection resolved and checked
    against ``allowed`` (a reach), every operation bounded by ``deadline``
    (``time.monotonic()``)."""

    def __init__(self, allowed: int, deadline: float) -> None:
        self.allowed = allowed
        self.deadline = deadline
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = _resolve(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"{host}: {exc.strerror or exc}") from None
        refused: AddressRefused | None = None
        failed: Exception | None = None
        for address in addresses:
            reach = address_reach(address)
            if reach > self.allowed:
                refused = refused or AddressRefused(host, address, reach, self.allowed)
                continue
            try:
                stream = self._inner.connect_tcp(
                    address, port, _left(self.deadline, timeout, httpcore.ConnectTimeout),
                    local_address, socket_options,
                )  # fmt: skip
            except httpcore.ConnectError as exc:
                failed = exc
                continue
            return DeadlineStream(stream, self.deadline)
        if failed is not None:
            raise failed
        if refused is not None:
            raise refused
        raise httpcore.ConnectError(f"{host}: no address")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ):
        raise httpcore.UnsupportedProtocol("fetches go over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by the fetch's deadline."""

    def __init__(self, inner: httpcore.NetworkStream, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(self._deadline, timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(self._deadline, timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = _left(self._deadline, timeout, httpcore.ConnectTimeout)
        return DeadlineStream(
            self._inner.start_tls(ssl_context, server_hostname, left), self._deadline
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


def _left(deadline: float, timeout: float | None, error: type[Exception]) -> float:
    """The time an operation may take: its own timeout, cut to what is left of the
    fetch; raises ``error`` once the deadline has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the fetch's deadline has passed")
    return left if timeout is None else min(timeout, left)


def _resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order, each once."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
