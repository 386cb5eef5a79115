"""Building and running the ragline MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import logging
import threading
from importlib.metadata import PackageNotFoundError, version
from typing import Literal

from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings

from rag_serving.config import RaglineConfig
from rag_serving.errors import ConfigError, RaglineError
from rag_serving.mcp.auth import (
    LOCAL_ACCESS,
    Access,
    ConfigTokenVerifier,
    check_tokens,
    current_http_access,
)
from rag_serving.mcp.service import RaglineService
from rag_serving.mcp.tools import AccessResolver, register_tools

LOOPBACK = ("127.0.0.1", "localhost", "::1")
INSTRUCTIONS = """ragline searches the user's personal notes (Markdown/Obsidian vaults).
Start with `search`; cite hits by path, heading and line range; read more with
`open` (by chunk_id or doc_id); follow [[links]] with `neighbors`. `list_sources`
and `status` describe what is indexed; `reindex` refreshes a source."""

log = logging.getLogger(__name__)


def build_server(
    config: RaglineConfig,
    *,
    auth: Literal["local", "tokens", "none"] = "local",
    base_url: str = "http://127.0.0.1:8765",
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
    service: RaglineService | None = None,
) -> MCPServer:
    """An MCP server over the index of ``config``.

    ``auth``: "local" (stdio and in-process: full access), "tokens" (HTTP: bearer
    tokens from ``[mcp] tokens``, each limited to its sources), or "none" (HTTP on
    a loopback address without tokens, full access to the index but no server paths).
    Pass ``service`` to share (and warm) the engine behind the tools.
    """
    service = service or RaglineService(config)
    resolve: AccessResolver
    verifier: ConfigTokenVerifier | None = None
    auth_settings: AuthSettings | None = None
    if auth == "tokens":
        if not config.mcp.tokens:
            raise ConfigError(
                f"{config.config_path}: [mcp] has no tokens; add one "
                "(`[[mcp.tokens]]` with user, token_env and sources) — see docs/mcp.md"
            )
        verifier = ConfigTokenVerifier(config.mcp.tokens)
        auth_settings = AuthSettings(issuer_url=base_url, resource_server_url=None)
        resolve = current_http_access
    elif auth == "none":
        resolve = _anonymous_full_access
    else:
        resolve = _local_access
    server = MCPServer(
        "ragline",
        version=_ragline_version(),
        instructions=INSTRUCTIONS,
        token_verifier=verifier,
        auth=auth_settings,
        log_level=log_level,
    )
    register_tools(server, service, resolve)
    return server


def _ragline_version() -> str:
    try:
        return version("ragline")
    except PackageNotFoundError:
        return ""


def _local_access() -> Access:
    return LOCAL_ACCESS


def _anonymous_full_access() -> Access:
    return Access(user="local-http", sources=None, local=False)


def transport_security(host: str, port: int, allowed_hosts: list[str]) -> TransportSecuritySettings:
    """DNS-rebinding protection, always on: only these Host/Origin values are accepted."""
    hosts = {"127.0.0.1", "localhost", "[::1]", *allowed_hosts}
    if host not in ("0.0.0.0", "::"):
        hosts.add(f"[{host}]" if ":" in host else host)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:{port}" for h in sorted(hosts)],
        allowed_origins=[f"http://{h}:{port}" for h in sorted(hosts)],
    )


def warm_in_background(service: RaglineService) -> None:
    """Open the index and load the query model without delaying the handshake."""

    def warm() -> None:
        try:
            service.warm()
        except RaglineError as exc:  # e.g. no index yet: tools report it when called
            log.warning("ragline: %s", exc)

    threading.Thread(target=warm, name="ragline-warm-up", daemon=True).start()


def run_stdio(config: RaglineConfig) -> None:
    """Serve over stdin/stdout with full access (the user who started it)."""
    service = RaglineService(config)
    server = build_server(config, auth="local", service=service)
    warm_in_background(service)
    server.run("stdio")


def run_http(
    config: RaglineConfig,
    host: str,
    port: int,
    *,
    no_auth: bool = False,
    allowed_hosts: list[str] | None = None,
) -> None:
    """Serve streamable HTTP on ``host:port`` (path ``/mcp``), bearer tokens required."""
    if no_auth and host not in LOOPBACK:
        raise ConfigError(
            f"--no-auth is only allowed on a loopback address, not {host}; configure "
            "[mcp] tokens to serve other machines"
        )
    for warning in check_tokens(config.mcp, [s.name for s in config.sources]):
        log.warning("ragline: %s", warning)
    base = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    service = RaglineService(config)
    server = build_server(
        config,
        auth="none" if no_auth else "tokens",
        base_url=base,
        log_level="INFO",
        service=service,
    )
    warm_in_background(service)
    server.run(
        "streamable-http",
        host=host,
        port=port,
        transport_security=transport_security(host, port, allowed_hosts or []),
    )
