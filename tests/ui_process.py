"""Starting `ragline ui` for a test, waiting until it answers, and stopping it."""

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
from typing import Any

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_answering(url: str, process: subprocess.Popen, timeout_s: float = 120) -> None:
    """Wait until the Dagster webserver at ``url`` answers (fail if the process ends)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/server_info", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        output = process.stdout.read().decode() if process.stdout and process.poll() else ""
        assert process.poll() is None, output
        time.sleep(1)
    pytest.fail(f"the Dagster UI did not answer within {timeout_s:.0f} s")


@contextmanager
def running_ragline_ui(
    config_path: Path, cwd: Path, stop_timeout_s: float = 60, **popen: Any
) -> Iterator[str]:
    """`ragline ui` on a free port in its own session; yields its URL; stops the whole
    session (SIGTERM, then SIGKILL) afterwards."""
    port = free_port()
    env = dict(os.environ)
    env.pop("DAGSTER_HOME", None)
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.STDOUT)
    process = subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), "ui", "--port", str(port)],
        cwd=cwd, env=env, start_new_session=True, **popen,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(url, process)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=stop_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
