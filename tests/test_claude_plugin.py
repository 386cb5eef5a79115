"""The Claude Code plugin: `ragline mcp-config --plugin DIR` writes valid JSON, a skill
with the frontmatter the format requires, and an MCP entry that starts a real ragline
server over stdio; the plugin checked in under integrations/ is the same plugin."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import anyio
import yaml
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rag_serving.config import RaglineConfig
from ragline.claude_plugin import PORTABLE_SERVER, plugin_files
from ragline.cli import cli

REPO = Path(__file__).resolve().parents[1]
CHECKED_IN = REPO / "integrations" / "claude-code" / "ragline"
# The Agent Skills format (agentskills.io/specification), which Claude Code reads.
SKILL_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def skill_frontmatter(path: Path) -> tuple[dict[str, Any], str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n")
    front, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(front), body


def test_mcp_config_writes_a_plugin_whose_server_answers(
    sample_index: RaglineConfig, tmp_path: Path
) -> None:
    target = tmp_path / "plugin"
    config_path = str(sample_index.config_path)
    result = CliRunner().invoke(
        cli, ["--config", config_path, "mcp-config", "--plugin", str(target)]
    )
    assert result.exit_code == 0, result.output
    assert f"claude --plugin-dir {target}" in result.output
    assert "/plugin install ragline@ragline-local" in result.output

    manifest = json.loads((target / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "ragline" and manifest["description"]
    market = json.loads((target / ".claude-plugin" / "marketplace.json").read_text())
    assert market["plugins"] == [
        {"name": "ragline", "source": "./", "description": manifest["description"]}
    ]
    assert market["owner"]["name"]
    servers = json.loads((target / ".mcp.json").read_text())["mcpServers"]
    entry = servers["ragline"]
    assert Path(entry["command"]).is_absolute()
    assert entry["args"] == ["--config", config_path, "mcp"]

    meta, body = skill_frontmatter(target / "skills" / "ragline" / "SKILL.md")
    assert SKILL_NAME.match(meta["name"]) and len(meta["name"]) <= 64
    assert meta["name"] == "ragline"  # the skill's folder
    assert 0 < len(meta["description"]) <= 1024
    assert "before grepping" in meta["description"]

    # The entry as Claude Code runs it: its command, args and env (plus PATH).
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**entry["env"], "HF_HUB_OFFLINE": "1", "PATH": os.environ.get("PATH", "")},
    )

    async def tools() -> set[str]:
        async with Client(params, read_timeout_seconds=60) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    listed = anyio.run(tools)
    assert {"search", "open", "neighbors", "list_sources", "status", "reindex"} <= listed
    # The skill names tools the server has (remember: where configured), and leaves
    # the arguments to the tools' descriptions.
    named = set(re.findall(r"`([a-z_]+)`", body))
    assert named & (listed | {"remember"}) >= {"search", "open", "neighbors", "remember"}


def test_writing_again_updates_and_a_foreign_folder_is_refused(
    sample_index: RaglineConfig, tmp_path: Path
) -> None:
    config_path = str(sample_index.config_path)
    target = tmp_path / "plugin"
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(
            cli, ["--config", config_path, "mcp-config", "--plugin", str(target)]
        )
        assert result.exit_code == 0, result.output
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    result = runner.invoke(cli, ["--config", config_path, "mcp-config", "--plugin", str(foreign)])
    assert result.exit_code != 0
    assert "holds no ragline plugin" in result.output and "Traceback" not in result.output
    assert [p.name for p in foreign.iterdir()] == ["keep.txt"]
    both = runner.invoke(
        cli, ["--config", config_path, "mcp-config", "--plugin", str(target), "--json"]
    )
    assert both.exit_code != 0 and "--json" in both.output


def test_the_checked_in_plugin_is_the_generated_one() -> None:
    """integrations/claude-code/ragline is the plugin with a portable server entry
    (`ragline mcp`): regenerate it with ragline.claude_plugin when the skill changes."""
    expected = plugin_files("ragline", PORTABLE_SERVER)
    found = {
        p.relative_to(CHECKED_IN).as_posix(): p.read_text(encoding="utf-8")
        for p in CHECKED_IN.rglob("*")
        if p.is_file()
    }
    assert found == expected
