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


def open_instance(data_dir: Path) -> DagsterInstance:
    """The project's Dagster instance (created on first use).

    Two processes creating the same instance at once (two first-ever `ragline index`
    runs) would both run its storage migrations and fail; a lock file serialises
    the opening."""
    from dagster import DagsterInstance

    home = prepare_dagster_home(data_dir)
    with open(home / ".ragline-open.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return DagsterInstance.from_config(str(home))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
