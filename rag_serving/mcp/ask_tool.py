"""The MCP `ask` tool (being built: registers nothing yet)."""

from __future__ import annotations

from typing import Any


def register(server: Any, service: Any, call: Any) -> None:
    """Add the `ask` tool to ``server`` when the configuration offers it."""
