"""The MCP `remember` tool (being built: registers nothing yet)."""

from __future__ import annotations

from typing import Any


def register(server: Any, service: Any, call: Any) -> None:
    """Add the `remember` tool to ``server`` when the configuration offers it."""
