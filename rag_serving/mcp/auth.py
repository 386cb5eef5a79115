"""Who is calling and which sources they may see.

stdio (and the in-process client) has full access. Over HTTP every request carries
a bearer token from ``[mcp] tokens``; the token maps to a user and the sources that
user may see. A source outside that list must never appear in any tool's output.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from rag_serving.config import McpConfig, McpToken
from rag_sources.errors import ConfigError

log = logging.getLogger(__name__)
SOURCES_CLAIM = "ragline_sources"
WRITE_CLAIM = "ragline_write"
ALL_SOURCES = "*"


@dataclass(frozen=True)
class Access:
    """What one caller may see: ``sources`` None means every source."""

    user: str
    sources: frozenset[str] | None = None
    local: bool = False  # stdio / in-process: the user who started the server
    # May save files (`remember`, `clip`): a token with `write = true`, or stdio with
    # `[mcp] stdio_write = true`.
    can_write: bool = False

    @property
    def restricted(self) -> bool:
        return self.sources is not None

    def can_see(self, source: str) -> bool:
        return self.sources is None or source in self.sources

    def visible(self, names: Iterable[str]) -> list[str]:
        """``names`` that this caller may see, in their order."""
        return [name for name in names if self.can_see(name)]


LOCAL_ACCESS = Access(user="local", sources=None, local=True)
# HTTP on a loopback address without tokens (`ragline mcp --http --no-auth`).
ANONYMOUS_HTTP_USER = "local-http"


def write_refusal(access: Access, action: str) -> str | None:
    """Why ``access`` may not ``action`` (e.g. "save notes"), naming the setting that
    grants it; None when it may write."""
    if access.can_write:
        return None
    if access.local:
        return (
            f"this server may not {action}: set `stdio_write = true` under [mcp] in its "
            "config, then restart the client"
        )
    if access.user == ANONYMOUS_HTTP_USER:
        return (
            f"this server may not {action}: an HTTP server without tokens (--no-auth) never "
            "writes; give the client a token with `write = true` in [[mcp.tokens]]"
        )
    return (
        f"this client may not {action}: its token needs `write = true` in its "
        "[[mcp.tokens]] entry of the server's config"
    )


NO_ACCESS = Access(user="anonymous", sources=frozenset())


def token_sources(token: McpToken) -> frozenset[str] | None:
    """The sources a token may see (None for ``["*"]``)."""
    return None if ALL_SOURCES in token.sources else frozenset(token.sources)


class ConfigTokenVerifier:
    """Bearer tokens from ``[mcp] tokens``, compared in constant time."""

    def __init__(self, tokens: list[McpToken]):
        self._tokens: list[tuple[bytes, int, McpToken]] = []
        for index, token in enumerate(tokens):
            secret = token.secret()
            if not secret:
                raise ConfigError(
                    f"[mcp] tokens[{index}] (user {token.user!r}): the environment variable "
                    f"{token.token_env!r} is not set or empty"
                )
            if len(secret) < 16:
                raise ConfigError(
                    f"[mcp] tokens[{index}] (user {token.user!r}): the token is shorter than "
                    "16 characters; use a long random value (e.g. `openssl rand -hex 32`)"
                )
            self._tokens.append((secret.encode(), index, token))

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access of the configured token equal to ``token``, else None (→ 401)."""
        given = token.encode()
        found: tuple[int, McpToken] | None = None
        for secret, index, entry in self._tokens:
            # Every entry is compared, so timing does not reveal which one matched.
            if hmac.compare_digest(secret, given) and found is None:
                found = (index, entry)
        if found is None:
            return None
        index, entry = found
        sources = token_sources(entry)
        return AccessToken(
            token=f"tokens[{index}]",  # never echo the secret itself
            client_id=entry.user,
            subject=f"{entry.user}#{index}",
            scopes=[],
            claims={
                SOURCES_CLAIM: None if sources is None else sorted(sources),
                WRITE_CLAIM: entry.write,
            },
        )


def access_from_token(token: AccessToken | None) -> Access:
    """The caller's access from a verified token (no token: nothing is visible)."""
    if token is None:
        return NO_ACCESS
    claims = token.claims or {}
    sources = claims.get(SOURCES_CLAIM)
    return Access(
        user=token.client_id,
        sources=None if sources is None else frozenset(sources),
        can_write=claims.get(WRITE_CLAIM) is True,
    )


def current_http_access() -> Access:
    """Access of the HTTP request being served (set by the SDK's bearer middleware)."""
    return access_from_token(get_access_token())


def check_tokens(config: McpConfig, configured_sources: Iterable[str]) -> list[str]:
    """Warnings about tokens naming sources that are not configured."""
    known = set(configured_sources)
    warnings = []
    for index, token in enumerate(config.tokens):
        unknown = [s for s in token.sources if s != ALL_SOURCES and s not in known]
        if unknown:
            warnings.append(
                f"[mcp] tokens[{index}] (user {token.user!r}) names unknown source(s) "
                f"{', '.join(repr(s) for s in unknown)}; they are ignored"
            )
    return warnings


MISSING_TOKEN = (
    "missing bearer token: send the header `Authorization: Bearer <token>` with the secret of "
    "one [[mcp.tokens]] entry of the server's ragline.toml (`ragline mcp-config` prints a "
    "client line with that header)"
)
UNKNOWN_TOKEN = (
    "unknown bearer token: it matches no [[mcp.tokens]] entry of this server; check the "
    "secret (compared exactly) and that the server was restarted after the config changed"
)
MALFORMED = "malformed Authorization header: "
# Registered HTTP authentication schemes: only these are named back. Anything else in
# front of the first space may be the secret itself, sent without "Bearer ".
KNOWN_SCHEMES = {
    "basic", "digest", "dpop", "hoba", "mutual", "negotiate", "ntlm", "oauth", "token",
    "privatetoken", "scram-sha-1", "scram-sha-256", "vapid", "aws4-hmac-sha256", "apikey",
    "concealed",
}  # fmt: skip
SEND_BEARER = "send `Authorization: Bearer <token>` with a secret from [[mcp.tokens]]"


def auth_failure(authorization: str | None) -> str:
    """Why a request with this ``Authorization`` header was refused, in one line: no
    token, a malformed header, or an unknown token. Neither the token nor any part of
    it is repeated (only a registered scheme name is)."""
    value = (authorization or "").strip()
    if not value:
        return MISSING_TOKEN
    scheme, _, _ = value.partition(" ")
    if scheme.lower() != "bearer":
        if scheme.lower() in KNOWN_SCHEMES:
            return f"{MALFORMED}it uses the '{scheme}' scheme; {SEND_BEARER}"
        return (
            f"{MALFORMED}it does not start with `Bearer ` (the word Bearer, one space, then "
            f"the secret); {SEND_BEARER}"
        )
    token = value[len("bearer ") :]  # as the SDK reads it: all after "Bearer "
    if not token.strip():
        return MISSING_TOKEN
    if token[0] in "\"'" or token[-1] in "\"'":
        return f"{MALFORMED}the token is in quotes; send the secret without them"
    if token.startswith("$"):
        return (
            f"{MALFORMED}the token is an unexpanded shell variable; set that variable in "
            "the environment the client starts from, or write the secret itself"
        )
    if token.startswith("<") and token.endswith(">"):
        return f"{MALFORMED}the token is a placeholder in angle brackets; put the secret there"
    if token != token.strip() or any(c.isspace() or not c.isprintable() for c in token):
        return (
            f"{MALFORMED}the token holds spaces or control characters; send one space "
            "after Bearer, then the secret alone"
        )
    return UNKNOWN_TOKEN


class ExplainAuthFailures:
    """ASGI middleware that rewrites the SDK's 401 answers ("invalid_token: Authentication
    required", which clients show as an OAuth problem) to say what is wrong — no token,
    a malformed header, or a token no ``[mcp] tokens`` entry has — and logs that reason
    for each refused request (never the token)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers") or []}
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        replaced = False

        async def explain(message: dict[str, Any]) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 401:
                replaced = True
                reason = auth_failure(authorization)
                # Clients show a 401 as "Failed to connect": the log says why.
                client = (scope.get("client") or ("?",))[0]
                log.warning(
                    "ragline: refused %s %s from %s: %s",
                    scope.get("method"), scope.get("path"), client, reason,
                )  # fmt: skip
                body = json.dumps({"error": "invalid_token", "error_description": reason})
                challenge = f'Bearer error="invalid_token", error_description="{reason}"'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body.encode())).encode()),
                            (b"www-authenticate", challenge.encode("latin-1")),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body.encode()})
            elif replaced and message["type"] == "http.response.body":
                return  # the SDK's own body; ours was sent with the start
            else:
                await send(message)

        await self.app(scope, receive, explain)
