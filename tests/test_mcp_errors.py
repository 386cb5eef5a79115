"""What an MCP client reads when a tool call fails: one line naming the tool, the
argument and what it must be — never pydantic's report or a bare "Error executing
tool X" — and, for a crash, the exception in one line while the server logs the
traceback. Over HTTP no server path is shown in those lines."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.mcp import build_server
from tests.conftest import write_config


@pytest.fixture(scope="module")
def server(sample_index: RaglineConfig) -> MCPServer:
    return build_server(sample_index)


def error_of(server: MCPServer, name: str, arguments: dict[str, Any]) -> str:
    async def run() -> Any:
        async with Client(server) as client:
            return await client.call_tool(name, arguments)

    result = anyio.run(run)
    assert result.is_error, f"{name}({arguments}) did not fail"
    return str(result.content[0].text)


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("search", {"query": "x", "k": "abc"},
     "search: `k` must be an integer between 1 and 100, got 'abc'"),
    ("search", {"query": "x", "k": 0}, "search: `k` must be an integer between 1 and 100, got 0"),
    ("search", {"query": "x", "k": 101},
     "search: `k` must be an integer between 1 and 100, got 101"),
    ("search", {"query": 5}, "search: `query` must be a string, got 5"),
    ("search", {}, "search: `query` is required (a string)"),
    ("search", {"query": "x", "mode": "fuzzy"},
     "search: `mode` must be one of 'hybrid', 'bm25', 'vector', got 'fuzzy'"),
    ("search", {"query": "x", "sources": "notes"},
     "search: `sources` must be a list of strings, got 'notes'"),
    ("search", {"query": "x", "tags": [1, 2]}, "search: `tags` must be a list of strings, got [1, 2]"),
    ("search", {"query": "x", "limit": 5},
     "search: unknown argument `limit` (did you mean `k`?); it takes: query, k, mode, sources, "
     "kinds, types, path_prefix, tags, after, before"),
    ("search", {"query": "x", "sources": ["nope"]}, "search: unknown source 'nope'; did you mean"),
    ("search", {"query": "x", "after": "yesterday"}, "search: after 'yesterday' is not a date"),
    ("search", {"query": ""}, "search: the query is empty"),
    ("search", {"query": "sourdough " * 1000}, "search: the query is 10,000 characters long"),
    ("open", {}, "open: give `id` (a doc_id or chunk_id from search), or `source` and `path`"),
    ("open", {"id": "0123456789abcdef0123456789abcdef"},
     "open: no indexed note or chunk has id '0123456789abcdef0123456789abcdef'"),
    ("open", {"source": "nope", "path": "a.md"}, "open: unknown source 'nope'"),
    ("open", {"source": "notes", "path": "No such note.md"},
     "open: no indexed note at notes:No such note.md; "),
    ("open", {"id": "x", "start_line": 0}, "open: `start_line` must be an integer of at least 1, got 0"),
    ("open", {"id": "x", "end_line": "ten"},
     "open: `end_line` must be an integer of at least 1, got 'ten'"),
    ("open", {"source": "notes", "path": "Kubernetes.md", "start_line": 9, "end_line": 2},
     "open: end_line 2 is before start_line 9"),
    ("open", {"source": "notes", "path": "Kubernetes.md", "section": "Nope"},
     "open: no section 'Nope' in this document"),
    ("open", {"id": "x", "max_lines": 9999},
     "open: `max_lines` must be an integer between 1 and 5000, got 9999"),
    ("neighbors", {"id": 5}, "neighbors: `id` must be a string, got 5"),
    ("neighbors", {"doc_id": "abc"},
     "neighbors: unknown argument `doc_id` (did you mean `id`?); it takes: id, source, path"),
    ("neighbors", {"source": "notes", "path": "missing.md"},
     "neighbors: no indexed note at notes:missing.md; "),
    ("list_sources", {"source": "notes"}, "list_sources: unknown argument `source`; it takes no"),
    ("status", {"verbose": True}, "status: unknown argument `verbose`; it takes no arguments"),
    ("reindex", {}, "reindex: `source` is required (a string)"),
    ("reindex", {"source": "nope"}, "reindex: unknown source 'nope'"),
    ("reindex", {"source": "notes", "wait_seconds": -1},
     "reindex: `wait_seconds` must be a number between 0 and 3600, got -1"),
    ("reindex", {"source": "notes", "full": "maybe"}, "reindex: `full` must be true or false, got 'maybe'"),
    ("serch", {"query": "x"}, "unknown tool 'serch'; did you mean 'search'?"),
    # No silent coercion: a string is not a boolean or a number, a boolean not a number
    # (the SDK would read "yes" and "1" as true, "5" as 5 and true as 1).
    ("reindex", {"source": "nope", "full": "yes"}, "reindex: `full` must be true or false, got 'yes'"),
    ("reindex", {"source": "nope", "full": "true"},
     "reindex: `full` must be true or false, got 'true'"),
    ("reindex", {"source": "nope", "full": 1}, "reindex: `full` must be true or false, got 1"),
    ("reindex", {"source": "nope", "wait_seconds": "5"},
     "reindex: `wait_seconds` must be a number between 0 and 3600, got '5'"),
    ("reindex", {"source": "nope", "wait_seconds": True},
     "reindex: `wait_seconds` must be a number between 0 and 3600, got true"),
    ("search", {"query": "x", "rerank": "yes"}, "search: `rerank` must be true or false, got 'yes'"),
    ("search", {"query": "x", "rerank": 0}, "search: `rerank` must be true or false, got 0"),
    ("search", {"query": "x", "k": "5"}, "search: `k` must be an integer between 1 and 100, got '5'"),
    ("search", {"query": "x", "k": True}, "search: `k` must be an integer between 1 and 100, got true"),
    ("search", {"query": "x", "k": 2.5}, "search: `k` must be an integer between 1 and 100, got 2.5"),
    ("open", {"id": "x", "start_line": "3"},
     "open: `start_line` must be an integer of at least 1, got '3'"),
    ("open", {"id": "x", "max_chars": "1000"},
     "open: `max_chars` must be an integer between 100 and 400000, got '1000'"),
    ("open", {"id": "x", "start_char": False},
     "open: `start_char` must be an integer of at least 0, got false"),
    # An empty date is no date (it was read as no filter at all).
    ("search", {"query": "x", "after": ""}, "search: after '' is not a date; use YYYY-MM-DD"),
    ("search", {"query": "x", "before": " "}, "search: before ' ' is not a date; use YYYY-MM-DD"),
    # The tool's own argument names, not the CLI's --after/--before.
    ("search", {"query": "x", "after": "2024-06-01", "before": "2024-01-01"},
     "search: after 2024-06-01 is not before before 2024-01-01: no item can match"),
    # A guessed name that could mean two arguments names both.
    ("search", {"query": "x", "folder": "a"},
     "search: unknown argument `folder` (did you mean `folders` or `path_prefix`?)"),
    ("search", {"query": "x", "since": "2024-01-01"},
     "search: unknown argument `since` (did you mean `after`?)"),
    ("search", {"query": "x", "until": "2024-01-01"},
     "search: unknown argument `until` (did you mean `before`?)"),
    ("search", {"query": "x", "language": "python"},
     "search: unknown argument `language` (did you mean `languages`?)"),
]  # fmt: skip


def test_a_whole_number_may_be_sent_as_a_float(server: MCPServer) -> None:
    """JSON has one number type: 3.0 is the integer 3 (JSON Schema says so too)."""

    async def run() -> Any:
        async with Client(server) as client:
            return await client.call_tool("search", {"query": "sourdough", "k": 3.0})

    result = anyio.run(run)
    assert not result.is_error, result.content
    assert len(result.structured_content["hits"]) == 3


@pytest.mark.parametrize(("tool", "arguments", "expected"), BAD_CALLS)
def test_bad_arguments_read_as_one_line(
    server: MCPServer, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    message = error_of(server, tool, arguments)
    assert message.startswith(expected), message
    assert "\n" not in message and len(message) < 400, message
    for noise in ("validation error", "pydantic", "Error executing tool", "input_type"):
        assert noise not in message, message


@pytest.fixture(scope="module")
def broken_index(sample_index: RaglineConfig, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the sample index whose documents table lost its data files (a disk
    error, a sync tool): LanceDB fails with its own exception, not a RaglineError."""
    root = tmp_path_factory.mktemp("broken-index")
    shutil.copytree(sample_index.data_dir, root / "data")
    for data_file in (root / "data" / "lancedb" / "documents.lance" / "data").iterdir():
        data_file.unlink()
    sources = [{"name": s.name, "kind": s.kind, "path": str(s.path)} for s in sample_index.sources]
    return write_config(root, sources, data_dir=root / "data")


def test_a_crash_reaches_the_client_as_one_line_and_the_log_has_the_traceback(
    broken_index: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = build_server(parse_config_file(broken_index))
    with caplog.at_level(logging.ERROR, logger="rag_serving.mcp"):
        message = error_of(server, "open", {"source": "notes", "path": "Kubernetes.md"})
    assert message.startswith("open: internal error (RuntimeError: "), message
    assert message.endswith("; the server's log has the traceback"), message
    assert "\n" not in message
    assert any(r.exc_info and "open failed" in r.getMessage() for r in caplog.records)


def test_no_server_path_in_errors_over_http(broken_index: Path) -> None:
    """auth="none" is what `ragline mcp --http --no-auth` serves: not the local user."""
    config = parse_config_file(broken_index)
    server = build_server(config, auth="none")
    data_dir = str(config.data_dir)
    for tool, arguments in (
        ("open", {"source": "notes", "path": "Kubernetes.md"}),
        ("search", {"query": "sourdough"}),
    ):
        message = error_of(server, tool, arguments)
        assert "internal error" in message and "<path>" in message, message
        assert data_dir not in message and data_dir.lstrip("/") not in message, message
    # The local user (stdio) sees the path: it is theirs.
    local = error_of(build_server(config), "open", {"source": "notes", "path": "Kubernetes.md"})
    assert data_dir.lstrip("/") in local


def test_ragline_errors_hide_server_paths_over_http(tmp_path: Path) -> None:
    """ragline's own messages name paths for the local user ("no index at /home/…")."""
    config_path = write_config(tmp_path, [{"name": "notes", "kind": "markdown", "path": "."}])
    config = parse_config_file(config_path)
    remote = error_of(build_server(config, auth="none"), "search", {"query": "x"})
    assert remote == "search: no index at <path> yet; build it with `ragline index`", remote
    local = error_of(build_server(config), "search", {"query": "x"})
    assert str(config.data_dir) in local
