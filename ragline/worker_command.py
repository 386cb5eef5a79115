"""``ragline worker``: one Celery worker running the steps of indexing runs."""

from __future__ import annotations

import os
import socket

from rag_serving.config import RaglineConfig
from rag_sources.errors import ConfigError


def run_worker(
    config: RaglineConfig, name: str | None, loglevel: str, threads: int | None = None
) -> None:
    """Serve the Celery queue the indexing runs send their steps to, until stopped.

    The worker runs each step in its own process (``-P solo``), one at a time, so
    the embedder it loads for the first step stays loaded for the next ones. It
    records steps in the shared Dagster instance (Postgres) and writes the index."""
    if config.dagster.executor != "celery":
        raise ConfigError(
            f"{config.config_path}: `ragline worker` runs steps sent by the Celery "
            'executor; set [dagster] executor = "celery" (with storage = "postgres")'
        )
    from rag_assets.executors import CELERY_QUEUE, celery_app, share_cores
    from rag_assets.instance import prepare_dagster_home

    if threads is not None:
        share_cores(1, threads)
    home = prepare_dagster_home(config.data_dir, config.dagster)  # exports the storage URL
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["RAGLINE_CONFIG"] = str(config.config_path)
    app = celery_app(config.dagster)
    node = name or f"ragline-{os.getpid()}@{socket.gethostname()}"
    app.worker_main(
        ["worker", "--pool", "solo", "--queues", CELERY_QUEUE, "--hostname", node,
         "--loglevel", loglevel, "--without-gossip", "--without-mingle"]
    )  # fmt: skip
