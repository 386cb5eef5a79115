"""Every MCP tool through the in-process client, on the shared sample index (read only)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from rag_serving.config import RaglineConfig
from rag_serving.mcp import build_server

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


@pytest.fixture(scope="module")
def server(sample_index: RaglineConfig) -> MCPServer:
    return build_server(sample_index)


def call(server: MCPServer, name: str, arguments: dict[str, Any]) -> Any:
    """Call one tool; the structured output, or the error text for a failed call."""

    async def run() -> Any:
        async with Client(server) as client:
            result = await client.call_tool(name, arguments)
        if result.is_error:
            return {"error": result.content[0].text}
        return result.structured_content

    return anyio.run(run)


def test_tools_are_listed_with_schemas(server: MCPServer) -> None:
    async def run() -> list[Any]:
        async with Client(server) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(run)}
    assert set(tools) == {"search", "open", "neighbors", "list_sources", "status", "reindex"}
    for tool in tools.values():
        assert tool.description and len(tool.description) > 60
        assert tool.output_schema is not None
    search = tools["search"].input_schema["properties"]
    assert {
        "query",
        "k",
        "mode",
        "sources",
        "kinds",
        "path_prefix",
        "tags",
        "after",
        "before",
    } <= set(search)
    assert tools["search"].annotations.read_only_hint is True
    assert tools["reindex"].annotations.read_only_hint is False


def test_search_returns_citeable_hits(server: MCPServer) -> None:
    out = call(server, "search", {"query": "kubectl rollout undo", "k": 3})
    top = out["hits"][0]
    assert (top["source"], top["path"]) == ("notes", "Kubernetes.md")
    assert top["heading"] == "Rolling updates"  # the small sections share one chunk
    assert top["anchor"] == "[[Kubernetes#Rolling updates]]"
    assert top["line_start"] <= 13 <= top["line_end"]
    assert top["chunk_id"] and top["doc_id"]
    assert top["stale"] is False and top["stale_reason"] is None
    assert "**" in top["snippet"]


def test_search_filters(server: MCPServer) -> None:
    out = call(server, "search", {"query": "notes", "sources": ["journal"], "k": 10})
    assert out["hits"] and {h["source"] for h in out["hits"]} == {"journal"}
    out = call(server, "search", {"query": "garden", "tags": ["garden"], "mode": "bm25"})
    assert {h["path"] for h in out["hits"]} <= {"gardening/Compost.md", "gardening/Tomatoes.md"}
    out = call(server, "search", {"query": "heap", "path_prefix": "gardening/"})
    assert all(h["path"].startswith("gardening/") for h in out["hits"])
    out = call(
        server,
        "search",
        {"query": "mountain glacier", "after": "2023-01-01", "before": "2024-01-01", "k": 5},
    )
    assert [h["path"] for h in out["hits"]] == ["2023-01-15.md"]
    assert out["filters"]["after"].startswith("2023-01-01")
    out = call(server, "search", {"query": "x", "kinds": ["markdown"], "k": 1, "mode": "vector"})
    assert out["mode"] == "vector" and len(out["hits"]) == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"sources": ["note"]}, "unknown source 'note'; did you mean 'notes'"),
        ({"tags": ["gardn"]}, "unknown tag 'gardn'; did you mean 'garden'"),
        ({"kinds": ["markdwn"]}, "unknown kind 'markdwn'; did you mean 'markdown'"),
        ({"after": "last week"}, "is not a date"),
    ],
)
def test_search_unknown_filter_values_fail_loudly(
    server: MCPServer, arguments: dict[str, Any], message: str
) -> None:
    out = call(server, "search", {"query": "bread", **arguments})
    assert message in out["error"]


def test_open_by_chunk_id_returns_the_chunk_lines(server: MCPServer) -> None:
    hit = call(server, "search", {"query": "kubectl rollout undo", "k": 1})["hits"][0]
    out = call(server, "open", {"id": hit["chunk_id"]})
    assert out["chunk_id"] == hit["chunk_id"] and out["doc_id"] == hit["doc_id"]
    assert (out["line_start"], out["line_end"]) == (hit["line_start"], hit["line_end"])
    assert "kubectl rollout undo" in out["text"]


def test_open_by_path_whole_note_and_line_numbers(server: MCPServer) -> None:
    out = call(server, "open", {"source": "notes", "path": "Sourdough starter.md"})
    # The frontmatter takes lines 1-6; the body keeps the file's line numbers.
    assert out["body_start_line"] == 7 and out["line_start"] == 7
    assert out["text"].splitlines()[0] == "# Feeding"
    assert out["frontmatter"]["aliases"] == ["levain"]
    lines = call(
        server,
        "open",
        {"source": "notes", "path": "Sourdough starter.md", "start_line": 9, "end_line": 10},
    )
    assert lines["text"].splitlines() == [
        "Feed the starter every day with equal weights of flour and water. A starter at",
        "100% hydration doubles in four to six hours at room temperature.",
    ]
    assert lines["frontmatter"] is None
    by_id = call(server, "open", {"id": out["doc_id"], "max_lines": 2})
    assert by_id["truncated"] is True and by_id["line_end"] == 8


def test_open_section(server: MCPServer) -> None:
    out = call(server, "open", {"source": "notes", "path": "Kubernetes", "section": "rollback"})
    assert out["section"] == "Rolling updates > Rollback"
    assert out["text"].startswith("## Rollback")
    nested = call(
        server, "open", {"source": "notes", "path": "Kubernetes.md", "section": "Rolling updates"}
    )
    assert "## Rollback" in nested["text"]  # a section spans its subsections
    missing = call(server, "open", {"source": "notes", "path": "Kubernetes.md", "section": "Nope"})
    assert "no section 'Nope'" in missing["error"] and "'Rolling updates'" in missing["error"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"source": "notes", "path": "../journal/2023-01-15.md"}, "no indexed note at notes:"),
        ({"source": "notes", "path": "/etc/passwd"}, "no indexed note at notes:"),
        ({"source": "notes", "path": "drafts/draft.tmp.md"}, "no indexed note"),  # excluded
        # failed to parse: not there to open, and the error says why
        ({"source": "notes", "path": "invalid utf8.md"}, "invalid utf8.md failed to index:"),
        ({"source": "nope", "path": "a.md"}, "unknown source 'nope'"),
        ({"id": "0123456789abcdef0123456789abcdef"}, "no indexed note or chunk has id"),
        ({"id": "' OR 1=1 --"}, "no indexed note or chunk has id"),
        ({}, "give `id`"),
    ],
)
def test_open_only_returns_indexed_notes(
    server: MCPServer, arguments: dict[str, Any], message: str
) -> None:
    assert message in call(server, "open", arguments)["error"]


def test_neighbors_links_embeds_and_backlinks(server: MCPServer) -> None:
    out = call(server, "neighbors", {"source": "notes", "path": "Sourdough starter.md"})
    assert out["note"]["title"] == "Sourdough starter care"
    [link] = out["links"]
    assert (link["target"], link["heading"], link["alias"]) == (
        "Budget",
        "Groceries",
        "the grocery budget",
    )
    assert link["resolved"]["path"] == "finance/Budget.md" and link["line"] == 15
    [back] = out["backlinks"]
    assert back["source_note"]["path"] == "finance/Budget.md" and back["line"] == 11

    compost = call(server, "neighbors", {"source": "notes", "path": "gardening/Compost.md"})
    [embedded_in] = compost["backlinks"]
    assert embedded_in["embed"] is True and embedded_in["heading"] == "Ratio"
    tomatoes = call(server, "neighbors", {"id": embedded_in["source_note"]["doc_id"]})
    [embed] = tomatoes["embeds"]
    assert embed["resolved"]["path"] == "gardening/Compost.md" and tomatoes["links"] == []


def test_list_sources_and_status(server: MCPServer, sample_index: RaglineConfig) -> None:
    sources = {s["name"]: s for s in call(server, "list_sources", {})["sources"]}
    assert set(sources) == {"notes", "journal"}
    assert sources["journal"]["documents"] == 2 and sources["journal"]["chunks"] >= 2
    assert sources["notes"]["last_indexed_at"] is not None
    assert sources["notes"]["path"] == str(sample_index.source("notes").path)  # stdio: local
    status = {s["name"]: s for s in call(server, "status", {})["sources"]}
    notes = status["notes"]
    assert [e["path"] for e in notes["errors"]] == ["invalid utf8.md"]
    assert {s["path"] for s in notes["skipped"]} == {"binary.md", "empty.md"}
    assert notes["pending_changes"]["total"] == 0
    assert status["journal"]["errors"] == []


def test_reindex_rejects_unknown_source(server: MCPServer) -> None:
    out = call(server, "reindex", {"source": "journl"})
    assert "unknown source 'journl'; did you mean 'journal'" in out["error"]
