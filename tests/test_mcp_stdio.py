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
