"""``ragline ui``: the Dagster webserver and daemon for this project."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from rag_serving.config import RaglineConfig
from rag_serving.errors import RaglineError

# Written while `ragline ui` runs, so other processes (the MCP server's reindex
# tool) can launch runs through the running webserver and daemon.
WEBSERVER_MARKER = "webserver.json"


def run_ui(config: RaglineConfig, host: str, port: int) -> int:
    """Run ``dagster dev`` on the ragline code location until interrupted."""
    from rag_assets.instance import prepare_dagster_home

    home = prepare_dagster_home(config.data_dir)
    env = dict(os.environ, RAGLINE_CONFIG=str(config.config_path), DAGSTER_HOME=str(home))
    _register_partitions(config)
    dagster = shutil.which("dagster") or os.path.join(os.path.dirname(sys.executable), "dagster")
    if not os.path.exists(dagster):
        raise RaglineError("the `dagster` command is missing; reinstall ragline")
    command = [dagster, "dev", "-m", "rag_assets.definitions", "-h", host, "-p", str(port)]
    url = f"http://{host}:{port}"
    print(f"Dagster UI on {url} (DAGSTER_HOME={home}); Ctrl-C stops it.")
    marker = home / WEBSERVER_MARKER
    marker.write_text(json.dumps({"url": url, "pid": os.getpid()}), encoding="utf-8")
    # Its own process group: at the end, whatever dagster dev leaves running (code
    # servers, run workers) is stopped with it, and no process is orphaned.
    # (preexec_fn only resets two signal dispositions.)
    child = subprocess.Popen(command, env=env, preexec_fn=_default_signals, process_group=0)

    def stop(signum: int, _frame: object) -> None:
        # dagster dev stops on SIGINT (it maps SIGTERM onto its SIGINT handler).
        _signal_child(child, signal.SIGINT)

    # SIGTERM (a service manager, a script, a test) and SIGHUP (the terminal closed)
    # stop dagster dev and remove the marker too.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        return child.wait()
    except KeyboardInterrupt:
        _signal_child(child, signal.SIGINT)
        return child.wait()
    finally:
        _stop_group(child)
        marker.unlink(missing_ok=True)


def _default_signals() -> None:
    """In the child: SIGINT and SIGTERM back to their defaults. A shell script's
    ``cmd &`` (and ``nohup``) starts ``ragline ui`` with SIGINT ignored; inherited,
    that makes dagster dev (whose SIGTERM handler is its SIGINT handler) and its
    webserver and daemon ignore both, so nothing could stop them but SIGKILL."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _signal_child(child: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to dagster dev only (it shuts its services down itself)."""
    if child.poll() is None:
        child.send_signal(signum)


def _stop_group(child: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Stop dagster dev and anything left in its process group: SIGTERM, then SIGKILL
    after ``grace_s`` seconds."""
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=grace_s * 3)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(child.pid, signum)
        except (ProcessLookupError, PermissionError):
            return  # the group is empty: every process has ended
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(child.pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.2)


def _register_partitions(config: RaglineConfig) -> None:
    """Make every configured source a partition, so the UI can run it."""
    from rag_assets.assets.indexing import WRITER_POOL
    from rag_assets.instance import open_instance
    from rag_assets.partitions import SOURCES_PARTITIONS_NAME
    from rag_assets.writer_turn import ensure_writer_pool

    instance = open_instance(config.data_dir)
    # The run queue holds writer runs back only once the pool's limit is recorded.
    ensure_writer_pool(instance, WRITER_POOL)
    known = set(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    missing = [s.name for s in config.sources if s.name not in known]
    if missing:
        instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, missing)
