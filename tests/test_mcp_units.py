"""The MCP server's pure parts: link resolution, line ranges, paths, tokens, markers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from rag_serving.config import McpToken, RaglineConfig
from rag_serving.index.filters import SearchFilters
from rag_serving.index.links import LinkGraph
from rag_serving.mcp.auth import ConfigTokenVerifier, access_from_token
from rag_serving.mcp.dagster_client import WEBSERVER_MARKER, running_webserver
from rag_serving.mcp.documents import normalize_path
from rag_serving.mcp.search import SearchRequest, obsidian_anchor
from rag_serving.reading.excerpts import Body, RangeError
from rag_sources.errors import ConfigError


def _doc(
    doc_id: str, path: str, links: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    base = {"heading": None, "block": None, "alias": None, "embed": False, "line": 1}
    full = [base | link for link in links or []]
    return {
        "doc_id": doc_id,
        "source": extra.get("source", "vault"),
        "path": path,
        "title": Path(path).stem,
        "aliases": extra.get("aliases", []),
        "links_json": json.dumps(full),
    }


def test_links_resolve_like_obsidian() -> None:
    graph = LinkGraph.build(
        [
            _doc(
                "a",
                "projects/Plan.md",
                [
                    {"target": "Ideas"},  # same folder wins over the shorter path
                    {"target": "../Home.md"},  # a relative Markdown link
                    {"target": "archive/Old"},  # a path suffix
                    {"target": "hq"},  # an alias
                    {"target": ""},  # [[#Heading]] inside the note
                    {"target": "Missing"},
                    {"target": "Elsewhere"},  # only in another source
                ],
            ),
            _doc("b", "projects/Ideas.md"),
            _doc("c", "Ideas.md"),
            _doc("d", "Home.md", aliases=["HQ"]),
            _doc("e", "notes/archive/Old.md"),
            _doc("f", "Elsewhere.md", source="other"),
        ]
    )
    resolved = [edge.resolved.doc_id if edge.resolved else None for edge in graph.outgoing["a"]]
    assert resolved == ["b", "d", "e", "d", "a", None, None]
    assert [edge.origin.doc_id for edge in graph.incoming["d"]] == ["a", "a"]
    assert "a" not in graph.incoming  # a link within the note is no backlink


def test_body_keeps_file_line_numbers() -> None:
    body = Body("# A\n\none\n\n## B\n\ntwo\n\n# C\nthree\n", first_line=5)
    assert body.last_line == 14
    assert body.cut(7, 7, 100).text == "one"
    assert body.cut(1, 6, 100).line_start == 5  # the frontmatter lines are not in the body
    cut = body.cut(5, 14, 3)
    assert (cut.line_end, cut.truncated) == (7, True)
    with pytest.raises(RangeError, match="frontmatter"):
        body.cut(1, 4, 100)
    with pytest.raises(RangeError, match="past the end"):
        body.cut(15, 20, 100)
    sections = {s.title: (s.line_start, s.line_end) for s in body.sections()}
    assert sections == {"A": (5, 12), "A > B": (9, 12), "C": (13, 14)}
    assert body.section("a#b").title == "A > B"
    with pytest.raises(RangeError, match="its headings and parts: 'A', 'A > B', 'C'"):
        body.section("D")


def test_body_parts_are_opened_whole() -> None:
    sections = (
        '[{"anchor": "page=1", "label": "Page 1", "line_start": 1, "line_end": 2},'
        ' {"anchor": "page=2", "label": "Page 2", "line_start": 4, "line_end": 6}]'
    )
    body = Body.of("first\npage\n\nsecond\npage\nends\n", 1, sections)
    # a chunk on page 2 opens page 2 whole
    assert body.choose_range(None, None, None, (5, 5, "")) == (4, 6, "Page 2", "page=2")
    assert body.choose_range(None, None, "Page 1", None) == (1, 2, "Page 1", "page=1")
    assert body.choose_range(None, None, "#page=2", None)[3] == "page=2"
    # an explicit range wins; no parts: the chunk's own lines
    assert body.choose_range(2, 4, None, (5, 5, "")) == (2, 4, None, None)
    plain = Body("# A\n\none\n", 1)
    assert plain.choose_range(None, None, None, (3, 3, "A")) == (3, 3, "A", None)
    with pytest.raises(RangeError, match="'page=1', 'page=2'"):
        body.section("page=9")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("notes/a.md", "notes/a.md"),
        ("./notes//a.md", "notes/a.md"),
        ("/etc/passwd", "etc/passwd"),  # looked up in the index only: never found
        ("notes/../../secret.md", None),
        ("..", None),
        ("a\\..\\..\\b.md", None),
        ("", None),
    ],
)
def test_paths_never_leave_the_source(given: str, expected: str | None) -> None:
    assert normalize_path(given) == expected


def test_obsidian_anchor() -> None:
    assert obsidian_anchor("dir/Note.md", "A > B") == "[[dir/Note#A#B]]"
    assert obsidian_anchor("Note.md", "") == "[[Note]]"


def test_a_search_request_carries_every_filter() -> None:
    # Each filter field is copied by name: a filter SearchRequest lacked would fail here.
    every = {"sources": ("a",), "kinds": ("markdown",), "path_prefix": "p/", "tags": ("t",),
             "types": ("pdf",), "languages": ("python",), "symbols": ("f",), "authors": ("x",),
             "senders": ("s",), "recipients": ("r",), "folders": ("INBOX",),
             "series": ("S",), "feeds": ("F",)}  # fmt: skip
    request = SearchRequest(query="q", after="2024-01-01", before="2024-02-01", **every)
    filters = request.filters()
    assert {name: getattr(filters, name) for name in every} == every
    assert (filters.after.isoformat(), filters.before.isoformat()) == (
        "2024-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00",
    )  # fmt: skip
    assert set(SearchFilters.__dataclass_fields__) == set(every) | {"after", "before"}


def test_token_verifier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGLINE_UNIT_TOKEN", "env-token-0123456789abcdef")
    verifier = ConfigTokenVerifier(
        [
            McpToken(user="ann", token="literal-token-0123456789", sources=["notes"]),
            McpToken(user="ben", token_env="RAGLINE_UNIT_TOKEN"),
        ]
    )
    ann = anyio.run(verifier.verify_token, "literal-token-0123456789")
    assert ann is not None and ann.token != "literal-token-0123456789"  # no secret echoed
    assert access_from_token(ann).sources == frozenset({"notes"})
    ben = anyio.run(verifier.verify_token, "env-token-0123456789abcdef")
    assert access_from_token(ben).sources is None and access_from_token(ben).user == "ben"
    assert anyio.run(verifier.verify_token, "literal-token-012345678") is None
    assert access_from_token(None).sources == frozenset()  # no token: nothing visible
    monkeypatch.delenv("RAGLINE_UNIT_TOKEN")
    with pytest.raises(ConfigError, match="RAGLINE_UNIT_TOKEN"):
        ConfigTokenVerifier([McpToken(user="ben", token_env="RAGLINE_UNIT_TOKEN")])


def test_webserver_marker_needs_a_live_process(tmp_path: Path) -> None:
    config = RaglineConfig(data_dir=tmp_path)
    marker = tmp_path / "dagster" / WEBSERVER_MARKER
    assert running_webserver(config) is None
    marker.parent.mkdir()
    marker.write_text(json.dumps({"url": "http://127.0.0.1:3999/", "pid": os.getpid()}))
    assert running_webserver(config) == "http://127.0.0.1:3999"
    marker.write_text(json.dumps({"url": "http://127.0.0.1:3999", "pid": 2**22 + 12345}))
    assert running_webserver(config) is None  # `ragline ui` was killed: stale marker


def test_a_refused_write_names_the_setting_that_grants_it() -> None:
    from rag_serving.mcp.auth import ANONYMOUS_HTTP_USER, LOCAL_ACCESS, Access, write_refusal

    assert write_refusal(Access(user="bob", can_write=True), "save notes") is None
    stdio = write_refusal(LOCAL_ACCESS, "save notes") or ""
    assert "stdio_write = true" in stdio
    token = write_refusal(Access(user="bob", sources=frozenset({"notes"})), "save notes") or ""
    assert "its token needs `write = true`" in token
    anonymous = write_refusal(Access(user=ANONYMOUS_HTTP_USER), "clip") or ""
    assert "--no-auth" in anonymous and "its token" not in anonymous
