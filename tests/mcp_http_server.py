"""`ragline mcp --http` in a subprocess for a test: started on a free 127.0.0.1 port,
waited for, stopped with SIGINT (as a user's Ctrl-C) at the end."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.ui_process import free_port


@contextmanager
def http_mcp_server(
    config_path: Path, log_path: Path, env: dict[str, str] | None = None
) -> Iterator[str]:
    """The server's MCP URL while it runs; its stderr goes to ``log_path`` (a file,
    which never fills up as a pipe nobody reads would)."""
    port = free_port()
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), "mcp", "--http",
         "--port", str(port)],
        env=env or dict(os.environ), stdout=subprocess.DEVNULL, stderr=log,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(log_path.read_text())
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
