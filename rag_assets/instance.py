"""The project's Dagster instance: embedded storage under the data dir."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from rag_serving.index.layout import IndexLayout

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from rag_serving.config import DagsterConfig

DAGSTER_HOME_ENV = "DAGSTER_HOME"
# What the user set, before ragline points DAGSTER_HOME at a data dir itself.
_USER_DAGSTER_HOME = os.environ.get(DAGSTER_HOME_ENV)
# sha256 of dagster.yaml texts earlier ragline versions installed: replaced by the
# current one (a file the user edited is kept). d603c9b: per-step writer pool;
# 9f8d14f: one writer run at a time (SQLite, Postgres).
_EARLIER_DEFAULTS = {
    "e71519edfd89b76d713416bce458b935be87ac13a2c24a330a3394b940755835",
    "96f6201e54092bf778e7f8b75b956235bd6a29ff9e9a94d7dbef6ca82614ec40",
    "da930f174f2154945b11f7b777b99edbaccdfae1650d23bc5463e86d9bfacffb",
}
_MAX_RUNS = re.compile(r"^(    max_concurrent_runs: )\d+$", re.MULTILINE)


def dagster_home_for(data_dir: Path) -> Path:
    """``$DAGSTER_HOME`` when set, else ``<data_dir>/dagster``."""
    if _USER_DAGSTER_HOME:
        return Path(_USER_DAGSTER_HOME).expanduser().resolve()
    return IndexLayout(data_dir).dagster_home


# The variable dagster.yaml reads the Postgres URL from: ragline sets it in its own
# environment (normalised to psycopg2's scheme), so `dagster dev` and every process it
# starts find it, and the URL (a password, perhaps) is never written to disk.
STORAGE_URL_ENV = "RAGLINE_DAGSTER_STORAGE_URL"
POSTGRES_STORAGE = f"""
# [dagster] storage = "postgres": runs, events, schedules, sensors' cursors and the
# writer pool in Postgres, shared by every host (the URL from ${STORAGE_URL_ENV},
# which ragline sets from [dagster] postgres_url or postgres_url_env).
storage:
  postgres:
    postgres_url:
      env: {STORAGE_URL_ENV}

# No compute logs (a step's raw stdout/stderr, kept as files on the host that ran
# it, where other hosts' UIs cannot read them): ragline's steps log through Dagster
# events, which are in Postgres with the run.
compute_logs:
  module: dagster._core.storage.noop_compute_log_manager
  class: NoOpComputeLogManager
"""


def instance_settings(storage: str = "sqlite", max_concurrent_runs: int = 1) -> str:
    """Text of the dagster.yaml that ragline installs (telemetry off, the run queue
    with ``max_concurrent_runs``; ``storage``: ``sqlite`` or ``postgres``)."""
    text = resources.files("rag_assets").joinpath("dagster.yaml").read_text(encoding="utf-8")
    text = _MAX_RUNS.sub(rf"\g<1>{max_concurrent_runs}", text)
    return text + POSTGRES_STORAGE if storage == "postgres" else text


def _installed_by_ragline(text: bytes) -> bool:
    if hashlib.sha256(text).hexdigest() in _EARLIER_DEFAULTS:
        return True
    normalised = _MAX_RUNS.sub(r"\g<1>1", text.decode("utf-8", "replace"))
    return normalised in {instance_settings(kind) for kind in ("sqlite", "postgres")}


def prepare_dagster_home(data_dir: Path, dagster: DagsterConfig | None = None) -> Path:
    """Create DAGSTER_HOME with ragline's dagster.yaml (kept if the user wrote their
    own; one ragline installed is brought up to date). ``dagster``: the config's
    ``[dagster]`` settings (None: keep the storage the file has); for Postgres, the
    URL is put in this process's environment for Dagster to read.

    Nothing else of the environment changes (child processes of tests must not
    inherit one index's instance); open the instance with ``open_instance``."""
    home = dagster_home_for(data_dir)
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    current = settings.read_text(encoding="utf-8") if settings.exists() else None
    if dagster is not None:
        url = dagster.storage_url()  # a missing or wrong URL: a ConfigError, before Dagster
        if url is not None:
            os.environ[STORAGE_URL_ENV] = url
        wanted = instance_settings(dagster.storage, dagster.max_concurrent_runs)
    else:  # keep the storage and the run limit the file names
        postgres = current is not None and POSTGRES_STORAGE in current
        limit = _MAX_RUNS.search(current or "")
        runs = int(limit.group(0).rsplit(" ", 1)[1]) if limit else 1
        wanted = instance_settings("postgres" if postgres else "sqlite", runs)
    ours = current is None or _installed_by_ragline(current.encode("utf-8"))
    if ours and current != wanted:
        settings.write_text(wanted, encoding="utf-8")
    return home


# Runs of `ragline watch` do not capture stdout/stderr into files: the capture starts
# `tail` and a watcher process per run (~1 s of a 2.5 s run on two cores), and the
# runs print nothing there (their logs are Dagster events, shown in the UI anyway).
NO_LOG_CAPTURE = {
    "compute_logs": {
        "module": "dagster._core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
}


def open_instance(
    data_dir: Path, capture_logs: bool = True, dagster: DagsterConfig | None = None
) -> DagsterInstance:
    """The project's Dagster instance (created on first use; ``dagster``: the
    config's ``[dagster]``, see ``prepare_dagster_home``).

    Two processes creating the same instance at once (two first-ever `ragline index`
    runs) would both run its storage migrations and fail; a lock file serialises
    the opening."""
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    home = prepare_dagster_home(data_dir, dagster)
    with open(home / ".ragline-open.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if capture_logs:
                return DagsterInstance.from_config(str(home))
            ref = InstanceRef.from_dir(str(home), overrides=NO_LOG_CAPTURE)  # type: ignore[arg-type]
            return DagsterInstance.from_ref(ref)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
