"""The ragline MCP server: search, open and follow links in the index from Claude.

``build_server(config)`` returns an ``mcp.server.MCPServer`` with the tools
``search``, ``open``, ``neighbors``, ``list_sources``, ``status`` and ``reindex``;
``ragline mcp`` runs it over stdio (full access) or streamable HTTP (bearer tokens
from ``[mcp] tokens``, each limited to its sources).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_serving.mcp.server import build_server, run_http, run_stdio

__all__ = ["build_server", "run_http", "run_stdio"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from rag_serving.mcp import server

        return getattr(server, name)
    raise AttributeError(name)
