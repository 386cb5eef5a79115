"""Building and running the ragline MCP server (stdio or streamable HTTP)."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal, NoReturn

from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError

from rag_serving.config import RaglineConfig
from rag_serving.mcp.auth import (
    ANONYMOUS_HTTP_USER,
    LOCAL_ACCESS,
    Access,
    ConfigTokenVerifier,
    ExplainAuthFailures,
    check_tokens,
    current_http_access,
)
from rag_serving.mcp.service import RaglineService
from rag_serving.mcp.tool_errors import argument_errors, unknown_arguments, unknown_tool
from rag_serving.mcp.tools import AccessResolver, register_tools
from rag_sources.errors import ConfigError, RaglineError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
INSTRUCTIONS = """ragline searches the user's own knowledge index: notes (Markdown and
Obsidian vaults), documents (PDF, office files, web pages, e-books), git repositories
(code and commits), mail, feeds and Calibre books. Start with `search`; cite a hit by
its `location` (path#page=…, path#L10-L42, note#Heading); read more with `open` (by
chunk_id or doc_id); follow [[links]], a file's symbols and commits or a message's
thread with `neighbors`. `list_sources` and `status` describe what is indexed and what
failed; `reindex` refreshes a source."""

log = logging.getLogger(__name__)


class RaglineMCPServer(MCPServer):
    """``MCPServer`` whose failed tool calls read as one line: ``search: `k` must be an
    integer between 1 and 100, got 'abc'`` instead of pydantic's report, unknown
    arguments refused by name (the SDK ignores them), and no bare "Error executing
    tool X" (a crash names its exception; its traceback goes to the log)."""

    _schemas: dict[str, dict[str, Any]] | None = None

    async def _input_schemas(self) -> dict[str, dict[str, Any]]:
        if self._schemas is None:
            self._schemas = {tool.name: tool.input_schema for tool in await self.list_tools()}
        return self._schemas

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        schemas = await self._input_schemas()
        schema = schemas.get(name)
        if schema is None:
            raise ToolError(unknown_tool(name, list(schemas)))
        arguments = arguments or {}
        unknown = unknown_arguments(name, schema, arguments)
        if unknown:
            raise ToolError(unknown)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            # What the tools' own wrapper did not catch (e.g. output conversion).
            cause = exc.__cause__ or exc
            log.error("ragline: tool %s failed", name, exc_info=cause)
            raise ToolError(
                f"{name}: internal error ({type(cause).__name__}); the server's log has the "
                "traceback"
            ) from exc
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(argument_errors(name, cause, schema, arguments)) from cause
            if isinstance(cause, ToolError):  # raised by the tool: its own message
                raise ToolError(f"{name}: {cause}") from cause
            raise


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
        local = replace(LOCAL_ACCESS, can_write=config.mcp.stdio_write)
        resolve = functools.partial(_same_access, local)
    server = RaglineMCPServer(
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


def _same_access(access: Access) -> Access:
    return access


def _anonymous_full_access() -> Access:
    return Access(user=ANONYMOUS_HTTP_USER, sources=None, local=False)


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


def end_process(code: int) -> NoReturn:
    """Flush and end the process at once, without interpreter finalisation.

    Why: when stdin closes (or a signal stops the HTTP server) the warm-up thread or
    a tool's worker thread may still be inside native code with the GIL released,
    e.g. creating the ONNX Runtime session. At finalisation CPython (3.11–3.13) ends
    such daemon threads with ``pthread_exit`` as soon as they ask for the GIL back;
    its forced unwind through onnxruntime's C++ frames calls ``std::terminate``
    ("terminate called without an active exception", SIGABRT). Nothing needs
    finalising: the server only reads the index, and a ``reindex`` child process
    goes on by itself.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    logging.shutdown()
    os._exit(code)


def serve_then_exit(serve: Callable[[], object]) -> NoReturn:
    """Run ``serve`` and end the process with its outcome as the exit code: 0 when the
    stdio client closed stdin; 130 for Ctrl-C (SIGINT); an HTTP server stopped by
    SIGTERM shuts down gracefully and then dies of that signal (uvicorn re-raises it)."""
    code = 0
    try:
        serve()
    except RaglineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = exc.exit_code
    except SystemExit as exc:  # e.g. uvicorn when the port is taken
        code = exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    end_process(code)


def plain_logging(level: str) -> None:
    """Log one line per record to stderr. Set before the SDK configures its Rich handler
    (``basicConfig`` then does nothing), which wraps at 80 columns when stderr is not a
    terminal and puts its file:line column inside a wrapped message: a refused token's
    reason came out in pieces."""
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )


def run_stdio(config: RaglineConfig) -> NoReturn:
    """Serve over stdin/stdout with full access (the user who started it); the process
    ends when the client closes stdin."""
    plain_logging("WARNING")
    service = RaglineService(config)
    server = build_server(config, auth="local", service=service)
    warm_in_background(service)
    serve_then_exit(lambda: server.run("stdio"))


def run_http(
    config: RaglineConfig,
    host: str,
    port: int,
    *,
    no_auth: bool = False,
    allowed_hosts: list[str] | None = None,
) -> NoReturn:
    """Serve streamable HTTP on ``host:port`` (path ``/mcp``), bearer tokens required;
    the process ends when the server stops (SIGINT or SIGTERM)."""
    if no_auth and host not in LOOPBACK:
        raise ConfigError(
            f"--no-auth is only allowed on a loopback address, not {host}; configure "
            "[mcp] tokens to serve other machines"
        )
    plain_logging("INFO")
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
    app = ExplainAuthFailures(
        server.streamable_http_app(
            transport_security=transport_security(host, port, allowed_hosts or []), host=host
        )
    )
    import uvicorn

    uvicorn_server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info"))
    warm_in_background(service)
    serve_then_exit(uvicorn_server.run)
