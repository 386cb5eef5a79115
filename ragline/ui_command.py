"""``ragline ui``: the Dagster webserver and daemon for this project."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from typing import Any

from rag_serving.config import RaglineConfig
from rag_sources.errors import RaglineError

# Written while `ragline ui` runs, so other processes (the MCP server's reindex
# tool) can launch runs through the running webserver and daemon.
WEBSERVER_MARKER = "webserver.json"


def run_ui(config: RaglineConfig, host: str, port: int) -> int:
    """Run ``dagster dev`` on the ragline code location until interrupted."""
    from rag_assets.instance import prepare_dagster_home

    home = prepare_dagster_home(config.data_dir, config.dagster)
    env = dict(os.environ, RAGLINE_CONFIG=str(config.config_path), DAGSTER_HOME=str(home))
    _register_partitions(config)
    dagster = shutil.which("dagster") or os.path.join(os.path.dirname(sys.executable), "dagster")
    if not os.path.exists(dagster):
        raise RaglineError("the `dagster` command is missing; reinstall ragline")
    command = [dagster, "dev", "-m", "rag_assets.definitions", "-h", host, "-p", str(port)]
    url = f"http://{host}:{port}"
    print(
        f"Dagster UI on {url} (DAGSTER_HOME={home}; runs in {config.dagster.where()}); "
        "Ctrl-C stops it."
    )
    marker = home / WEBSERVER_MARKER
    marker.write_text(json.dumps({"url": url, "pid": os.getpid()}), encoding="utf-8")
    # (preexec_fn only resets two signal dispositions.) dagster dev stays in this
    # process group, so a service manager or a script that stops the group stops all.
    child = subprocess.Popen(command, env=env, preexec_fn=_default_signals)
    family: list[Any] = []  # dagster dev's processes, noted before it stops them

    def stop(signum: int, _frame: object) -> None:
        # dagster dev stops on SIGINT (it maps SIGTERM onto its SIGINT handler).
        family[:] = _descendants(child.pid)
        if child.poll() is None:
            child.send_signal(signal.SIGINT)

    # SIGTERM (a service manager, a script, a test) and SIGHUP (the terminal closed)
    # stop dagster dev and remove the marker too.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        return child.wait()
    except KeyboardInterrupt:
        stop(signal.SIGINT, None)
        return child.wait()
    finally:
        _stop_all(child, family or _descendants(child.pid))
        marker.unlink(missing_ok=True)


def _default_signals() -> None:
    """In the child: SIGINT and SIGTERM back to their defaults. A shell script's
    ``cmd &`` (and ``nohup``) starts ``ragline ui`` with SIGINT ignored; inherited,
    that makes dagster dev (whose SIGTERM handler is its SIGINT handler) and its
    webserver and daemon ignore both, so nothing could stop them but SIGKILL."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _descendants(pid: int) -> list[Any]:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _stop_all(child: subprocess.Popen[bytes], family: list[Any], grace_s: float = 10.0) -> None:
    """Stop dagster dev and every process it started (``family``: webserver, daemon,
    code servers, run workers), so none is left orphaned: SIGINT to dagster dev, then
    SIGTERM and at last SIGKILL to whatever is still running."""
    import psutil

    if child.poll() is None:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=grace_s * 3)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    _, alive = psutil.wait_procs(family, timeout=grace_s)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def _register_partitions(config: RaglineConfig) -> None:
    """Make every configured source a partition, so the UI can run it."""
    from rag_assets.instance import open_instance
    from rag_assets.partitions import SOURCES_PARTITIONS_NAME

    instance = open_instance(config.data_dir, dagster=config.dagster)
    known = set(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    missing = [s.name for s in config.sources if s.name not in known]
    if missing:
        instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, missing)
