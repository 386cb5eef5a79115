"""The project's Dagster instance: embedded storage under the data dir."""

from __future__ import annotations

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


def dagster_home_for(data_dir: Path) -> Path:
    """``$DAGSTER_HOME`` when set, else ``<data_dir>/dagster``."""
    if _USER_DAGSTER_HOME:
        return Path(_USER_DAGSTER_HOME).expanduser().resolve()
    return IndexLayout(data_dir).dagster_home


def instance_settings() -> str:
    """Text of the dagster.yaml that ragline installs (telemetry off, writer pool)."""
    return resources.files("rag_assets").joinpath("dagster.yaml").read_text(encoding="utf-8")


def prepare_dagster_home(data_dir: Path) -> Path:
    """Create DAGSTER_HOME with ragline's dagster.yaml (kept if the user has one).

    The environment is left alone (child processes of tests must not inherit one
    index's instance); open the instance with ``open_instance``."""
    home = dagster_home_for(data_dir)
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():
        settings.write_text(instance_settings(), encoding="utf-8")
    return home


def open_instance(data_dir: Path) -> DagsterInstance:
    """The project's Dagster instance (created on first use)."""
    from dagster import DagsterInstance

    return DagsterInstance.from_config(str(prepare_dagster_home(data_dir)))
