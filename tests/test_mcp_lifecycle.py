"""The stdio MCP server's process life, through the `mcp` SDK's own stdio client:
a short-lived client (a health check, a script) that disconnects right after one
quick call sees the server exit with code 0, and a server started exactly as
`ragline mcp-config` tells a client to start it records `reindex` runs in the
Dagster instance the UI shows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rag_serving.config import RaglineConfig

# Runs the server as its child on the same stdin/stdout, and records the server's
# exit code and stderr: the SDK's client does not report them.
RECORD_EXIT = """
import subprocess, sys
rc_file, err_file, command = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(err_file, "wb") as err:
    code = subprocess.call(command, stderr=err)
with open(rc_file, "w") as out:
    out.write(str(code))
"""
MINIMAL_PATH = "/usr/bin:/bin"
QUICK_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("status", {}),
    ("search", {"query": "sourdough starter"}),
    ("status", {}),
    ("list_sources", {}),
    ("status", {}),
]


def test_quick_clients_see_a_clean_exit(sample_index: RaglineConfig, tmp_path: Path) -> None:
    """Each client starts the server, makes one call and closes stdin at once — while
    the server is still loading the query model in the background (before the fix,
    every such exit aborted: SIGABRT, "terminate called without an active exception")."""
    server = [sys.executable, "-m", "ragline.cli", "--config", str(sample_index.config_path)]

    async def one(index: int, tool: str, arguments: dict[str, Any]) -> tuple[bool, Path, Path]:
        rc_file, err_file = tmp_path / f"rc{index}", tmp_path / f"err{index}"
        params = StdioServerParameters(
            command=sys.executable,
            args=["-c", RECORD_EXIT, str(rc_file), str(err_file), *server, "mcp"],
            env={"HF_HUB_OFFLINE": "1", "PATH": os.environ.get("PATH", MINIMAL_PATH)},
        )
        async with Client(params, read_timeout_seconds=60) as client:
            result = await client.call_tool(tool, arguments)
        return result.is_error, rc_file, err_file

    for index, (tool, arguments) in enumerate(QUICK_CALLS):
        is_error, rc_file, err_file = anyio.run(one, index, tool, arguments)
        stderr = err_file.read_text(errors="replace")
        assert not is_error, stderr[-2000:]
        # No exit code: the client's 2 s grace after closing stdin ran out and it
        # killed the server.
        assert rc_file.exists(), f"{tool}: the server did not exit after stdin closed"
        assert "terminate called" not in stderr, stderr[-2000:]
        assert int(rc_file.read_text()) == 0, f"{tool}: exit code {rc_file.read_text()}"


def test_a_client_leaving_during_a_call_sees_a_clean_exit(
    sample_index: RaglineConfig, tmp_path: Path
) -> None:
    """A client that gives up on a call (a timeout, Ctrl-C) and closes stdin: the server
    abandons the call and exits at once — it used to wait for the call's worker thread,
    past the client's 2 s grace, and be killed."""
    rc_file, err_file = tmp_path / "rc", tmp_path / "err"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", RECORD_EXIT, str(rc_file), str(err_file), sys.executable, "-m",
              "ragline.cli", "--config", str(sample_index.config_path), "mcp"],
        env={"HF_HUB_OFFLINE": "1", "PATH": os.environ.get("PATH", MINIMAL_PATH)},
    )  # fmt: skip

    async def leave_early() -> bool:
        async with Client(params, read_timeout_seconds=60) as client:
            # The first search waits for the index and the query model (seconds).
            with anyio.move_on_after(0.2) as scope:
                await client.call_tool("search", {"query": "sourdough starter"})
        return scope.cancelled_caught

    assert anyio.run(leave_early), "the search answered within 0.2 s: nothing was in flight"
    stderr = err_file.read_text(errors="replace")
    assert rc_file.exists(), "the server did not exit within the client's grace period"
    assert "terminate called" not in stderr, stderr[-2000:]
    assert int(rc_file.read_text()) == 0, stderr[-2000:]


@pytest.fixture()
def journal_project(sample_vault: Path, tmp_path: Path) -> Path:
    """A config for a copy of the sample journal (nothing indexed yet)."""
    import tomli_w

    vault = tmp_path / "journal"
    shutil.copytree(sample_vault / "journal", vault)
    payload = {
        "data_dir": str(tmp_path / "data"),
        "freshness": {"sensor_interval_s": 86400},
        "sources": [{"name": "journal", "kind": "markdown", "path": str(vault)}],
    }
    config = tmp_path / "ragline.toml"
    config.write_bytes(tomli_w.dumps(payload).encode())
    return config


def test_mcp_config_env_puts_reindex_runs_in_the_ui_instance(
    journal_project: Path, tmp_path: Path
) -> None:
    """The user's shell has DAGSTER_HOME (so `ragline ui` uses it); the client starts
    the server with only what `ragline mcp-config` printed. Its `reindex` run must be
    in that instance, not in a second one at <data_dir>/dagster."""
    from dagster import DagsterInstance

    ui_home = tmp_path / "dagster-home-of-the-ui"
    printed = subprocess.run(
        [sys.executable, "-m", "ragline.cli", "--config", str(journal_project), "mcp-config",
         "--json"],
        env=dict(os.environ, DAGSTER_HOME=str(ui_home)), capture_output=True, text=True,
        check=True, cwd=tmp_path,
    ).stdout  # fmt: skip
    entry = json.loads(printed)["mcpServers"]["ragline"]
    assert entry["env"] == {
        "DAGSTER_HOME": str(ui_home.resolve()),
        "RAGLINE_CONFIG": str(journal_project.absolute()),
    }

    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**entry["env"], "PATH": MINIMAL_PATH},
        cwd="/",
    )

    async def reindex() -> Any:
        async with Client(params, read_timeout_seconds=300) as client:
            result = await client.call_tool("reindex", {"source": "journal", "wait_seconds": 240})
        assert not result.is_error, result.content[0].text
        return result.structured_content

    done = anyio.run(reindex)
    assert done["success"] is True and done["via"] == "in-process", done
    instance = DagsterInstance.from_config(str(ui_home))
    try:
        run = instance.get_run_by_id(done["run_id"])
        assert run is not None and run.tags.get("dagster/partition") == "journal"
    finally:
        instance.dispose()
    assert not (tmp_path / "data" / "dagster" / "history").exists()  # no second instance
