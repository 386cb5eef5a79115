"""``ragline mcp`` (serve the MCP server) and ``ragline mcp-config`` (client setup)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rag_serving.config import RaglineConfig
from rag_sources.errors import ConfigError

# Claude Code scopes: user (every project), project (.mcp.json, shared), local.
SCOPES = ("user", "project", "local")
# The variable an HTTP client line names when a token's secret is in the config.
DEFAULT_TOKEN_VARIABLE = "RAGLINE_MCP_TOKEN"
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def server_command(config: RaglineConfig) -> list[str]:
    """The absolute command line that starts this project's stdio MCP server."""
    if config.config_path is None:
        raise ConfigError("the config was not loaded from a file")
    venv_script = Path(sys.executable).parent / "ragline"
    found = shutil.which("ragline")
    if venv_script.is_file():
        launcher = [str(venv_script)]
    elif found:
        launcher = [str(Path(found).absolute())]
    else:
        launcher = [sys.executable, "-m", "ragline.cli"]
    return [*launcher, "--config", str(Path(config.config_path).absolute()), "mcp"]


def server_env(config: RaglineConfig) -> dict[str, str]:
    """What the stdio server needs from its environment, as absolute paths.

    MCP clients start servers with a minimal environment (Claude Desktop passes
    little more than HOME and PATH): without ``DAGSTER_HOME`` a ``reindex`` would be
    recorded in ``<data_dir>/dagster`` while ``ragline ui``, started from the user's
    shell, shows the instance at ``$DAGSTER_HOME`` — a second instance the UI never
    shows. ``RAGLINE_CONFIG`` names the same file as ``--config``, for the commands
    the server starts.
    """
    from rag_serving.mcp.dagster_client import dagster_home

    if config.config_path is None:
        raise ConfigError("the config was not loaded from a file")
    return {
        "DAGSTER_HOME": str(dagster_home(config).expanduser().resolve()),
        "RAGLINE_CONFIG": str(Path(config.config_path).absolute()),
    }


def desktop_config(config: RaglineConfig, name: str) -> dict[str, Any]:
    """The ``mcpServers`` entry for Claude Desktop's ``claude_desktop_config.json``."""
    command = server_command(config)
    entry = {"command": command[0], "args": command[1:], "env": server_env(config)}
    return {"mcpServers": {name: entry}}


def claude_code_line(config: RaglineConfig, name: str, scope: str = "user") -> str:
    """A ``claude mcp add`` command line for Claude Code (stdio)."""
    command = " ".join(shlex.quote(part) for part in server_command(config))
    # --env after the name: it takes several values, and must not swallow the name.
    env = " ".join(f"--env {shlex.quote(f'{k}={v}')}" for k, v in server_env(config).items())
    return (
        f"claude mcp add --transport stdio --scope {scope} {shlex.quote(name)} {env} -- {command}"
    )


def http_url(config: RaglineConfig) -> str:
    """Where a client on this machine reaches ``ragline mcp --http``."""
    host = config.mcp.host
    if host in ("0.0.0.0", "::", ""):  # every address: this machine's loopback is one
        host = "127.0.0.1" if host != "::" else "::1"
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{config.mcp.port}/mcp"


def claude_code_http_lines(config: RaglineConfig, name: str, scope: str = "user") -> list[str]:
    """A comment and a ``claude mcp add`` line per ``[[mcp.tokens]]`` entry, in the same
    ``scope`` as the stdio line. The header names the entry's ``token_env`` for the shell
    to expand; an entry with its secret in the config gets ``$RAGLINE_MCP_TOKEN`` and a
    note to export it (the secret is never printed)."""
    lines: list[str] = []
    for token in config.mcp.tokens:
        sources = "all sources" if "*" in token.sources else "sources: " + ", ".join(token.sources)
        variable = token.token_env or ""
        note = f"# user {token.user!r} ({sources})"
        if not _SHELL_NAME.fullmatch(variable):
            what = (
                f"its token is in ${variable}, which a shell cannot expand"
                if variable
                else "its token is written in the config"
            )
            note += f": {what}; export {DEFAULT_TOKEN_VARIABLE}=<that token> first"
            variable = DEFAULT_TOKEN_VARIABLE
        lines.append(note)
        lines.append(
            f"claude mcp add --transport http --scope {scope} {shlex.quote(name)} "
            f'{http_url(config)} --header "Authorization: Bearer ${{{variable}}}"'
        )
    return lines


def write_claude_plugin(config: RaglineConfig, name: str, directory: Path) -> None:
    """Write the Claude Code plugin for this config into ``directory``; say how to use it."""
    from ragline.claude_plugin import MARKETPLACE_NAME, PLUGIN_NAME, write_plugin

    server = desktop_config(config, name)["mcpServers"][name]
    written = write_plugin(directory, name, server)
    shown = shlex.quote(str(directory.absolute()))
    click.echo(f"wrote the Claude Code plugin {PLUGIN_NAME!r} ({len(written)} files) to {shown}")
    click.echo(f"  try it in one session:  claude --plugin-dir {shown}")
    click.echo(
        f"  or install it:          /plugin marketplace add {shown}   then   "
        f"/plugin install {PLUGIN_NAME}@{MARKETPLACE_NAME}"
    )


def register(cli: click.Group, handle_errors: Callable[..., Any], pass_context: Any) -> None:
    """Add the ``mcp`` and ``mcp-config`` commands to ``cli``."""

    @cli.command("mcp")
    @click.option("--http", "http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
    @click.option("--host", help="HTTP address (default: [mcp] host, 127.0.0.1).")
    @click.option("--port", type=click.IntRange(1, 65535), help="HTTP port (default: [mcp] port).")
    @click.option(
        "--allowed-host", "allowed_hosts", multiple=True,
        help="Another Host header to accept over HTTP (DNS-rebinding protection; repeatable).",
    )  # fmt: skip
    @click.option(
        "--no-auth", is_flag=True,
        help="HTTP without bearer tokens (loopback addresses only; full access).",
    )  # fmt: skip
    @pass_context
    @handle_errors
    def mcp(
        ctx: Any,
        http: bool,
        host: str | None,
        port: int | None,
        allowed_hosts: tuple[str, ...],
        no_auth: bool,
    ) -> None:
        """Run the MCP server (stdio by default; --http for streamable HTTP on /mcp)."""
        config: RaglineConfig = ctx.config
        if not http and (host or port or allowed_hosts or no_auth):
            raise click.UsageError("--host, --port, --allowed-host and --no-auth need --http")
        if http:
            from rag_serving.mcp.server import run_http

            run_http(
                config,
                host or config.mcp.host,
                port or config.mcp.port,
                no_auth=no_auth,
                allowed_hosts=list(allowed_hosts),
            )
        else:
            from rag_serving.mcp.server import run_stdio

            run_stdio(config)

    @cli.command("mcp-config")
    @click.option("--name", default="ragline", show_default=True, help="Server name in the client.")
    @click.option("--json", "as_json", is_flag=True, help="Print only the Claude Desktop JSON.")
    @click.option(
        "--scope", type=click.Choice(SCOPES), default="user", show_default=True,
        help="Claude Code scope of the `claude mcp add` lines (stdio and HTTP alike).",
    )  # fmt: skip
    @click.option(
        "--plugin", "plugin_dir", type=click.Path(path_type=Path, file_okay=False),
        help="Write a Claude Code plugin (this server and a skill on when to use it) "
        "into this folder instead.",
    )  # fmt: skip
    @pass_context
    @handle_errors
    def mcp_config(ctx: Any, name: str, as_json: bool, scope: str, plugin_dir: Path | None) -> None:
        """Print ready-to-paste MCP settings for Claude Desktop and Claude Code, or
        write a Claude Code plugin with --plugin."""
        config: RaglineConfig = ctx.config
        if plugin_dir is not None:
            if as_json:
                raise click.UsageError("--plugin writes files; it cannot go with --json")
            write_claude_plugin(config, name, plugin_dir)
            return
        desktop = json.dumps(desktop_config(config, name), indent=2)
        if as_json:
            click.echo(desktop)
            return
        click.echo("# Claude Desktop: merge into claude_desktop_config.json, then restart it")
        click.echo(desktop)
        click.echo("\n# Claude Code (stdio):")
        click.echo(claude_code_line(config, name, scope))
        if config.mcp.tokens:
            click.echo(
                "\n# Claude Code over HTTP (after `ragline mcp --http`), one line per "
                "[[mcp.tokens]] entry: run the one for your token"
            )
            for line in claude_code_http_lines(config, name, scope):
                click.echo(line)
