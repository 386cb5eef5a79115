"""What the MCP tools tell the caller, read against what they do (issue 27, items 12-13):
`open` on a file that failed says why, refuses arguments it would ignore, and always
returns the chunk it was given; filters accept the names their descriptions promise; a
`symbols` hit names the symbol that matched. Real index: a git repository (code and
commits), a documents folder (a good PDF and an encrypted one) and an mbox."""

from __future__ import annotations

import shutil
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.mcp import build_server
from ragline.indexing import index_sources
from tests.conftest import SHARED_DATA, write_config
from tests.git_repos import make_repo
from tests.test_mcp_tools import call

PDFS = SHARED_DATA / "corpora" / "pdf"
INBOX = """From alice@example.org Mon Jan 15 10:00:00 2024
From: Alice Liddell <alice@example.org>
To: Bob <bob@example.org>
Subject: Quarterly budget review
Date: Mon, 15 Jan 2024 10:00:00 +0000
Message-ID: <budget-1@example.org>

The quarterly budget review moves to Thursday; bring the spreadsheet of travel costs.

From bob@example.org Tue Jan 16 10:00:00 2024
From: Bob <bob@example.org>
To: Alice Liddell <alice@example.org>
Subject: Re: Quarterly budget review
Date: Tue, 16 Jan 2024 10:00:00 +0000
Message-ID: <budget-2@example.org>
In-Reply-To: <budget-1@example.org>
References: <budget-1@example.org>

Thursday works; the travel costs are in the shared folder.
"""


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    root = tmp_path_factory.mktemp("mcp-answers")
    repo = make_repo(root / "repo")
    docs = root / "docs"
    docs.mkdir()
    # report.pdf is password-protected: it fails to index, with a reason.
    shutil.copyfile(PDFS / "edge-cases" / "libreoffice-writer-password.pdf", docs / "report.pdf")
    shutil.copyfile(PDFS / "edge-cases" / "pdflatex-4-pages.pdf", docs / "paper.pdf")
    # A folder linked from outside the source is not followed: what is in it has a reason.
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "old.pdf").write_bytes((docs / "paper.pdf").read_bytes())
    (docs / "archive").symlink_to(root / "elsewhere")
    (root / "mail").mkdir()
    (root / "mail" / "inbox.mbox").write_text(INBOX)
    config_path = write_config(
        root,
        [
            {"name": "code", "kind": "git", "path": str(repo), "history_months": 0},
            {"name": "docs", "kind": "documents", "path": str(docs)},
            {"name": "mail", "kind": "mail", "path": str(root / "mail")},
        ],
        root / "data",
    )
    config = parse_config_file(config_path)
    outcomes = index_sources(config, [], full=False)
    assert all(o.success for o in outcomes), [o.error for o in outcomes]
    return config


@pytest.fixture(scope="module")
def server(mixed: RaglineConfig) -> MCPServer:
    return build_server(mixed)


def tool_schemas(server: MCPServer) -> dict[str, Any]:
    async def run() -> Any:
        async with Client(server) as client:
            return (await client.list_tools()).tools

    return {tool.name: tool for tool in anyio.run(run)}


# ---- item 12: `open` -----------------------------------------------------------


def test_opening_a_file_that_failed_says_why_not_did_you_mean(server: MCPServer) -> None:
    for tool in ("open", "neighbors"):
        message = call(server, tool, {"source": "docs", "path": "report.pdf"})["error"]
        assert message == (
            f"{tool}: docs:report.pdf failed to index: encrypted PDF (password required); "
            "remove the password or exclude the file"
        ), message
    skipped = call(server, "open", {"source": "code", "path": "src/app/__init__.py"})["error"]
    assert skipped == "open: code:src/app/__init__.py is not indexed (skipped): empty file"
    # A file under a folder the scan did not follow or could not list: the folder's reason.
    inside = call(server, "open", {"source": "docs", "path": "archive/old.pdf"})["error"]
    assert inside == (
        "open: docs:archive/old.pdf is not indexed: its folder 'archive/': a symbolic link to "
        "a folder outside the source; not followed (only what is inside the source folder is "
        "indexed)"
    ), inside
    # A file nobody knows of still gets close matches.
    unknown = call(server, "open", {"source": "docs", "path": "papr.pdf"})["error"]
    assert unknown == "open: no indexed note at docs:papr.pdf; did you mean 'paper.pdf'?"


def test_a_notes_reason_is_found_without_its_extension_and_matches_status(
    sample_index: RaglineConfig,
) -> None:
    """Over HTTP (not the local user) the reason is the one `status` shows that caller."""
    remote = build_server(sample_index, auth="none")
    [error] = [e for s in call(remote, "status", {})["sources"] for e in s["errors"]]
    assert error["path"] == "invalid utf8.md"
    message = call(remote, "open", {"source": "notes", "path": "invalid utf8"})["error"]
    assert message == f"open: notes:invalid utf8.md failed to index: {error['message']}"


def test_open_refuses_a_section_with_a_line_range(server: MCPServer) -> None:
    base = {"source": "docs", "path": "paper.pdf", "section": "page=2"}
    for lines in ({"start_line": 50}, {"end_line": 60}, {"start_line": 50, "end_line": 60}):
        message = call(server, "open", {**base, **lines})["error"]
        assert message == (
            "open: give `section` or `start_line`/`end_line`, not both (a section is a "
            "range of its own)"
        ), message


def test_a_chunk_id_opens_its_page_or_function_and_always_holds_the_chunk(
    server: MCPServer, mixed: RaglineConfig
) -> None:
    from rag_serving.search.engine import SearchEngine

    engine = SearchEngine(mixed)
    assert engine.generation is not None
    rows = engine.store.read(
        engine.generation.table,
        where="path = 'paper.pdf'",
        columns=["chunk_id", "line_start", "line_end", "anchor"],
    ).to_pylist()
    page1 = sorted((r for r in rows if r["anchor"] == "page=1"), key=lambda r: r["line_start"])
    middle = page1[len(page1) // 2]
    # The whole page when it fits...
    whole = call(server, "open", {"id": middle["chunk_id"]})
    assert (whole["anchor"], whole["line_start"]) == ("page=1", page1[0]["line_start"])
    assert whole["line_end"] == page1[-1]["line_end"] and not whole["truncated"]
    # ...and the chunk's own lines when the page is longer than the caps.
    span = middle["line_end"] - middle["line_start"] + 1
    short = call(server, "open", {"id": middle["chunk_id"], "max_lines": span})
    assert (short["line_start"], short["line_end"]) == (middle["line_start"], middle["line_end"])
    assert short["anchor"] == "page=1" and not short["truncated"]

    # A code chunk opens its whole symbol.
    hit = call(server, "search", {"query": "exponential backoff", "symbols": ["retry_upload"]})
    opened = call(server, "open", {"id": hit["hits"][0]["chunk_id"]})
    assert opened["section"] == "function retry_upload"
    assert opened["text"].startswith("def retry_upload(")


# ---- item 13: filters and what they say --------------------------------------------


def test_a_symbols_hit_names_the_symbol_that_matched(server: MCPServer) -> None:
    """UploadClient and its methods are one chunk; the hit names the method asked for."""
    for asked in ("upload", "UploadClient.upload"):
        out = call(server, "search", {"query": "send a file", "symbols": [asked], "k": 3})
        assert out["hits"], out
        top = out["hits"][0]
        assert top["symbol"] == "UploadClient.upload", top
        assert top["heading"] == "class UploadClient"  # the chunk is still the class
    plain = call(server, "search", {"query": "UploadClient sends files", "k": 1})["hits"][0]
    assert plain["symbol"] == "UploadClient"  # no filter: the chunk's first definition


def test_types_take_the_aliases_languages_take(server: MCPServer) -> None:
    for alias, language in (("py", "python"), ("golang", "go"), (".py", "python")):
        out = call(server, "search", {"query": "upload", "types": [alias], "k": 5})
        assert out["hits"] and {h["file_type"] for h in out["hits"]} == {language}, out
        assert out["filters"]["types"] == [language]


def test_authors_match_senders_and_every_text_says_so(server: MCPServer) -> None:
    out = call(server, "search", {"query": "budget", "authors": ["alice@example.org"], "k": 5})
    assert out["hits"] and {h["file_type"] for h in out["hits"]} == {"email"}
    assert {h["author"] for h in out["hits"]} == {"Alice Liddell"}
    missing = call(server, "search", {"query": "budget", "authors": ["nobody at all"]})["error"]
    assert "no indexed commit, message, book or feed entry has author 'nobody at all'" in missing
    search = tool_schemas(server)["search"]
    authors = search.input_schema["properties"]["authors"]["description"]
    assert "sender" in authors and "message" in authors, authors
    assert "messages (their sender)" in " ".join((search.description or "").split())


def test_dates_are_described_as_each_items_own_date(server: MCPServer) -> None:
    """after/before filter messages by their Date and feed entries by theirs, not
    only files by mtime and commits by their date."""
    out = call(server, "search", {"query": "budget review", "after": "2024-01-16", "k": 5})
    assert "inbox.mbox/budget-2@example.org" in {h["path"] for h in out["hits"]}
    assert "inbox.mbox/budget-1@example.org" not in {h["path"] for h in out["hits"]}
    search = tool_schemas(server)["search"]
    for name in ("after", "before"):
        text = search.input_schema["properties"][name]["description"]
        assert "Modified" not in text and "date" in text, text
    description = " ".join((search.description or "").split())
    for words in ("a message's Date", "a feed entry's", "a commit's date", "frontmatter"):
        assert words in description, words
    hit = search.output_schema["$defs"]["Hit"]["properties"]["modified"]["description"]
    assert "a message's Date" in hit and "File modification time" not in hit, hit
