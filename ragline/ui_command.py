"""``ragline ui``: the Dagster webserver and daemon for this project."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

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
    child = subprocess.Popen(command, env=env)

    def stop(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    # SIGTERM (a service manager, a test) stops dagster dev and removes the marker too.
    signal.signal(signal.SIGTERM, stop)
    try:
        return child.wait()
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        return child.wait()
    finally:
        marker.unlink(missing_ok=True)


def _register_partitions(config: RaglineConfig) -> None:
    """Make every configured source a partition, so the UI can run it."""
    from rag_assets.instance import open_instance
    from rag_assets.partitions import SOURCES_PARTITIONS_NAME

    instance = open_instance(config.data_dir)
    known = set(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    missing = [s.name for s in config.sources if s.name not in known]
    if missing:
        instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, missing)
