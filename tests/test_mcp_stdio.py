"""`ragline --config ... mcp` as a real subprocess, through the mcp stdio client, and the
client setup printed by `ragline mcp-config`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rag_serving.config import RaglineConfig
from ragline.cli import cli


def test_stdio_server_answers_every_read_tool(sample_index: RaglineConfig) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ragline.cli", "--config", str(sample_index.config_path), "mcp"],
        env={"HF_HUB_OFFLINE": "1", "PATH": os.environ.get("PATH", "")},
    )

    async def run() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            found = await client.call_tool("search", {"query": "sourdough starter", "k": 2})
            hit = found.structured_content["hits"][0]
            opened = await client.call_tool("open", {"id": hit["chunk_id"]})
            links = await client.call_tool("neighbors", {"id": hit["doc_id"]})
            sources = await client.call_tool("list_sources", {})
            bad = await client.call_tool("search", {"query": "x", "sources": ["nope"]})
            return {
                "tools": tools,
                "hit": hit,
                "opened": opened.structured_content,
                "links": links.structured_content,
                "sources": sources.structured_content,
                "bad": bad,
            }

    out = anyio.run(run)
    assert set(out["tools"]) == {"search", "open", "neighbors", "list_sources", "status", "reindex"}
    assert out["hit"]["path"] == "Sourdough starter.md"
    assert out["opened"]["text"].startswith("# Feeding")
    assert out["links"]["links"][0]["resolved"]["path"] == "finance/Budget.md"
    assert {s["name"] for s in out["sources"]["sources"]} == {"notes", "journal"}
    assert out["bad"].is_error and "unknown source 'nope'" in out["bad"].content[0].text


def test_mcp_config_prints_desktop_json_and_claude_code_line(
    sample_index: RaglineConfig,
) -> None:
    config_path = str(sample_index.config_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["--config", config_path, "mcp-config", "--json"])
    assert result.exit_code == 0, result.output
    entry = json.loads(result.output)["mcpServers"]["ragline"]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).exists()
    assert entry["args"] == ["--config", config_path, "mcp"]
    # Clients start servers with a minimal environment: what the server needs is in env.
    home = str(sample_index.data_dir / "dagster")
    assert entry["env"] == {"DAGSTER_HOME": home, "RAGLINE_CONFIG": config_path}

    text = runner.invoke(cli, ["--config", config_path, "mcp-config", "--name", "notes"]).output
    assert '"notes": {' in text
    assert (
        f"claude mcp add --transport stdio --scope user notes --env DAGSTER_HOME={home} "
        f"--env RAGLINE_CONFIG={config_path} -- {entry['command']}"
    ) in text


def test_mcp_options_are_checked(sample_index: RaglineConfig) -> None:
    runner = CliRunner()
    config_path = str(sample_index.config_path)
    no_http = runner.invoke(cli, ["--config", config_path, "mcp", "--port", "9999"])
    assert no_http.exit_code == 2 and "need --http" in no_http.output
    exposed = runner.invoke(
        cli, ["--config", config_path, "mcp", "--http", "--host", "0.0.0.0", "--no-auth"]
    )
    assert exposed.exit_code == 2 and "only allowed on a loopback address" in exposed.output
    no_tokens = runner.invoke(cli, ["--config", config_path, "mcp", "--http", "--port", "9"])
    assert no_tokens.exit_code == 2 and "[mcp] has no tokens" in no_tokens.output


def test_mcp_config_http_lines_name_the_configured_variable_in_the_same_scope(
    sample_index: RaglineConfig, tmp_path: Path
) -> None:
    """The HTTP line named $RAGLINE_MCP_TOKEN whatever the config said, and had no
    --scope, so Claude Code put it in another scope (local) than the stdio line (user)."""
    import tomli_w

    secret = "b5f0c0e4a3d54d8f9a1e2c7d6b8a9f01"
    payload = {
        "data_dir": str(sample_index.data_dir),
        "sources": [
            {"name": s.name, "kind": s.kind, "path": str(s.path)} for s in sample_index.sources
        ],
        "mcp": {
            "port": 9123,
            "tokens": [
                {"user": "me", "token_env": "MY_RAGLINE_SECRET", "sources": ["*"]},
                {"user": "partner", "token": secret, "sources": ["notes"]},
            ],
        },
    }
    config_path = tmp_path / "ragline.toml"
    config_path.write_bytes(tomli_w.dumps(payload).encode())
    runner = CliRunner()
    for scope in ("user", "project"):
        args = ["--config", str(config_path), "mcp-config"]
        result = runner.invoke(cli, [*args, "--scope", scope] if scope != "user" else args)
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        stdio = [line for line in lines if line.startswith("claude mcp add --transport stdio")]
        http = [line for line in lines if line.startswith("claude mcp add --transport http")]
        assert len(stdio) == 1 and f"--scope {scope} ragline " in stdio[0]
        assert http == [
            f"claude mcp add --transport http --scope {scope} ragline "
            'http://127.0.0.1:9123/mcp --header "Authorization: Bearer ${MY_RAGLINE_SECRET}"',
            f"claude mcp add --transport http --scope {scope} ragline "
            'http://127.0.0.1:9123/mcp --header "Authorization: Bearer ${RAGLINE_MCP_TOKEN}"',
        ], result.output
        # The inline secret is never printed; the line for it says what to export.
        assert secret not in result.output
        assert (
            "# user 'partner' (sources: notes): its token is written in the config; "
            "export RAGLINE_MCP_TOKEN=<that token> first"
        ) in result.output
        assert "# user 'me' (all sources)" in result.output
