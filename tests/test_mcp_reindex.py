"""`reindex` for real, on a small index of its own (a copy of the sample journal):
in-process (a `ragline index --json` subprocess) and through a running `ragline ui`.
One warm in-process server is kept across both, so they also show that it sees
index versions written by other processes without a restart."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.server import MCPServer

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.mcp import build_server
from rag_serving.mcp.dagster_client import WEBSERVER_MARKER, dagster_home


@pytest.fixture(scope="module", autouse=True)
def own_dagster_home() -> Iterator[None]:
    """Runs go to this index's own instance (``<data_dir>/dagster``), not to the
    DAGSTER_HOME that building another test index exported into this process."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DAGSTER_HOME", raising=False)
        yield


@pytest.fixture(scope="module")
def journal(sample_vault: Path, tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    """A config for a copy of the sample journal; nothing is indexed yet."""
    import tomli_w

    root = tmp_path_factory.mktemp("mcp-reindex")
    vault = root / "journal"
    shutil.copytree(sample_vault / "journal", vault)
    payload = {
        "data_dir": str(root / "data"),
        # No sensor run may race the runs this test asks for.
        "freshness": {"sensor_interval_s": 86400},
        "sources": [{"name": "journal", "kind": "markdown", "path": str(vault)}],
    }
    (root / "ragline.toml").write_bytes(tomli_w.dumps(payload).encode())
    return parse_config_file(root / "ragline.toml")


@pytest.fixture(scope="module")
def server(journal: RaglineConfig) -> MCPServer:
    return build_server(journal)


def call(server: MCPServer, name: str, arguments: dict[str, Any]) -> Any:
    async def run() -> Any:
        async with Client(server) as client:
            result = await client.call_tool(name, arguments)
        return {"error": result.content[0].text} if result.is_error else result.structured_content

    return anyio.run(run)


def add_note(config: RaglineConfig, name: str, text: str) -> None:
    (config.source("journal").path / name).write_text(text, encoding="utf-8")


def paths_found(server: MCPServer, query: str) -> list[str]:
    return [h["path"] for h in call(server, "search", {"query": query, "k": 3})["hits"]]


def test_reindex_in_process(server: MCPServer, journal: RaglineConfig) -> None:
    assert "build it with `ragline index`" in call(server, "search", {"query": "x"})["error"]
    started = call(server, "reindex", {"source": "journal", "wait_seconds": 0})
    assert (started["status"], started["success"]) == ("STARTED", None)
    assert "call reindex again" in started["summary"]

    done = call(server, "reindex", {"source": "journal", "wait_seconds": 240})  # the same run
    assert done["via"] == "in-process" and done["success"] is True, done
    assert done["status"] == "SUCCESS" and done["run_id"] and done["error"] is None
    assert done["assets"]["raw_files"]["new"] == 2
    assert done["documents"] == 2 and done["chunks"] >= 2
    assert done["summary"].startswith("journal: 2 files (2 new")
    assert paths_found(server, "glacier mountain hut")[0] == "2023-01-15.md"


def _wait_for_webserver(config: RaglineConfig, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 60
    marker = dagster_home(config) / WEBSERVER_MARKER
    while time.monotonic() < deadline:
        assert proc.poll() is None, "ragline ui exited"
        if marker.exists():
            url = json.loads(marker.read_text())["url"]
            try:
                if httpx.get(f"{url}/server_info", timeout=1).status_code == 200:
                    return url
            except httpx.TransportError:
                pass
        time.sleep(0.5)
    raise AssertionError(f"ragline ui did not write {marker} and answer within 60 s")


@pytest.fixture()
def dagster_ui(journal: RaglineConfig) -> Iterator[str]:
    """`ragline ui` on a free port, stopped (with its whole process group) afterwards."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(journal.config_path), "ui",
         "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        yield _wait_for_webserver(journal, proc)
    finally:
        _stop(proc)
        (dagster_home(journal) / WEBSERVER_MARKER).unlink(missing_ok=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill `ragline ui` and everything it started (its own process group): a temporary
    instance needs no graceful shutdown, and Dagster's takes seconds."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_reindex_through_running_dagster_ui(
    server: MCPServer, journal: RaglineConfig, dagster_ui: str
) -> None:
    if "error" in call(server, "search", {"query": "x"}):  # run alone: build the index first
        assert call(server, "reindex", {"source": "journal"})["success"] is True
    assert "2025-02-03.md" not in paths_found(server, "volcano crater")  # the engine is open

    add_note(journal, "2025-02-03.md", "# Volcano\n\nWe climbed to the crater rim of a volcano.\n")
    [state] = call(server, "status", {})["sources"]
    assert state["pending_changes"]["new"] == 1
    done = call(server, "reindex", {"source": "journal", "wait_seconds": 240})
    assert done["via"] == "dagster" and done["success"] is True, done
    assert done["run_url"] == f"{dagster_ui}/runs/{done['run_id']}"
    assert done["assets"]["parsed_documents"]["dagster/row_count"] == 3
    assert done["documents"] == 3
    # The same warm server sees the version the Dagster run wrote.
    assert paths_found(server, "volcano crater")[0] == "2025-02-03.md"


def test_a_runs_output_is_read_back_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that prints more than a summary's worth (or endless errors) is read back
    no further than the caps: a failed outcome whose error is stderr's last line."""
    import tempfile

    from rag_serving.mcp import reindex

    monkeypatch.setattr(reindex, "MAX_OUTPUT_BYTES", 1024)
    monkeypatch.setattr(reindex, "MAX_ERROR_BYTES", 256)
    stdout, stderr = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115 (closed by _read_outcome)
    script = (
        "import sys; sys.stdout.write('[' * 5000); "
        "sys.stderr.write('noise\\n' * 10000 + 'error: the last line\\n')"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=stdout, stderr=stderr)
    process.wait(timeout=60)
    child = reindex._Child(process, stdout, stderr, time.monotonic())
    outcome = reindex._read_outcome("notes", child)
    assert not outcome.success
    assert outcome.error is not None and outcome.error.endswith(": the last line")
