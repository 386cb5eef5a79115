"""The project's Dagster instance: embedded storage under the data dir."""

from __future__ import annotations

import fcntl
import hashlib
import os
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from rag_serving.index.layout import IndexLayout

if TYPE_CHECKING:
    from dagster import DagsterInstance

DAGSTER_HOME_ENV = "DAGSTER_HOME"
# What the user set, before ragline points DAGSTER_HOME at a data dir itself.
_USER_DAGSTER_HOME = os.environ.get(DAGSTER_HOME_ENV)
# sha256 of dagster.yaml texts earlier ragline versions installed: replaced by the
# current one (a file the user edited is kept). d603c9b: per-step writer pool.
_EARLIER_DEFAULTS = {"e71519edfd89b76d713416bce458b935be87ac13a2c24a330a3394b940755835"}


def dagster_home_for(data_dir: Path) -> Path:
    """``$DAGSTER_HOME`` when set, else ``<data_dir>/dagster``."""
    if _USER_DAGSTER_HOME:
        return Path(_USER_DAGSTER_HOME).expanduser().resolve()
    return IndexLayout(data_dir).dagster_home


def instance_settings() -> str:
    """Text of the dagster.yaml that ragline installs (telemetry off, writer pool)."""
    return resources.files("rag_assets").joinpath("dagster.yaml").read_text(encoding="utf-8")


def prepare_dagster_home(data_dir: Path) -> Path:
    """Create DAGSTER_HOME with ragline's dagster.yaml (kept if the user wrote their
    own; one an earlier ragline installed is brought up to date).

    The environment is left alone (child processes of tests must not inherit one
    index's instance); open the instance with ``open_instance``."""
    home = dagster_home_for(data_dir)
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    current = instance_settings()
    if not settings.exists():
        settings.write_text(current, encoding="utf-8")
    else:
        digest = hashlib.sha256(settings.read_bytes()).hexdigest()
        if digest in _EARLIER_DEFAULTS:
            settings.write_text(current, encoding="utf-8")
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


def open_instance(data_dir: Path, capture_logs: bool = True) -> DagsterInstance:
    """The project's Dagster instance (created on first use).

    Two processes creating the same instance at once (two first-ever `ragline index`
    runs) would both run its storage migrations and fail; a lock file serialises
    the opening."""
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    home = prepare_dagster_home(data_dir)
    with open(home / ".ragline-open.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if capture_logs:
                return DagsterInstance.from_config(str(home))
            ref = InstanceRef.from_dir(str(home), overrides=NO_LOG_CAPTURE)  # type: ignore[arg-type]
            return DagsterInstance.from_ref(ref)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
