"""The MCP `remember` tool on a vault indexed for real: the note it writes (frontmatter,
links to hits), found by search right after; never outside its folder, never over
another note; refused without write permission (in-process, over HTTP with tokens,
over stdio); a token limited to some sources learns nothing of the others."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import tomli_w
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from rag_serving.config import RaglineConfig, RememberConfig
from rag_serving.mcp import build_server
from rag_serving.notes_inbox import MAX_TITLE_CHARS
from rag_sources.naming import MAX_SLUG_BYTES, file_slug
from tests.conftest import build_index
from tests.mcp_http_server import http_mcp_server
from tests.test_mcp_http import call as http_call
from tests.test_mcp_tools import call as call_tool

NOTES = {
    "Kubernetes.md": "# Rolling updates\n\nA Deployment replaces pods gradually.\n\n"
    "## Rollback\n\n`kubectl rollout undo deployment/web` returns to the previous one.\n",
    "gardening/Compost.md": "# Compost\n\nTurn the heap every week; keep it moist.\n",
}
JOURNAL = {"2024-06-02.md": "# Market day\n\nBought quinces and a sourdough loaf.\n"}
WRITER = "writer-token-0123456789abcdef"  # notes only, may write
READER = "reader-token-0123456789abcdef"  # notes only, may not write
STRANGER = "stranger-token-0123456789abcd"  # journal only, may write
SERVER = [sys.executable, "-m", "ragline.cli"]


def write_files(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def write_config(
    directory: Path, vault: Path, journal: Path, data_dir: Path, **sections: Any
) -> Path:
    """A config of the two sources over ``data_dir``, with the given sections."""
    payload = {
        "data_dir": str(data_dir),
        "sources": [
            {"name": "notes", "kind": "markdown", "path": str(vault)},
            {"name": "journal", "kind": "markdown", "path": str(journal)},
        ],
        **sections,
    }
    path = directory / f"ragline-{len(list(directory.glob('ragline*.toml')))}.toml"
    path.write_bytes(tomli_w.dumps(payload).encode())
    return path


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    """Two markdown sources indexed for real; notes saved into "notes"/inbox; the
    stdio server may write."""
    root = tmp_path_factory.mktemp("remember")
    vault = write_files(root / "vault", NOTES)
    journal = write_files(root / "journal", JOURNAL)
    (root / "outside").mkdir()
    config_path = write_config(
        root,
        vault,
        journal,
        root / "data",
        mcp={"stdio_write": True},
        remember={"source": "notes", "folder": "inbox"},
    )
    return build_index(config_path)


def vault_of(config: RaglineConfig) -> Path:
    return Path(next(s.path for s in config.sources if s.name == "notes"))


def journal_of(config: RaglineConfig) -> Path:
    return Path(next(s.path for s in config.sources if s.name == "journal"))


def call(config: RaglineConfig, name: str, arguments: dict[str, Any]) -> Any:
    """One tool call in-process; the structured output, or {"error": text}."""
    return call_tool(build_server(config), name, arguments)


def first_hit(config: RaglineConfig, query: str, source: str) -> dict[str, Any]:
    out = call(config, "search", {"query": query, "sources": [source], "k": 1})
    return out["hits"][0]


def files_in(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def notes_files(config: RaglineConfig) -> set[str]:
    """Every file in the sources' folders and beside them (not the index)."""
    root = vault_of(config).parent
    return {f for f in files_in(root) if not f.startswith("data/")}


def test_a_note_is_written_with_frontmatter_and_links_and_found_right_after(
    index: RaglineConfig,
) -> None:
    chunk = first_hit(index, "kubectl rollout undo", "notes")
    journal_doc = first_hit(index, "quinces market", "journal")["doc_id"]
    out = call(
        index,
        "remember",
        {
            "title": "Rollback checklist: Überblick",
            "body": "Roll back with a **zanzibarquokka** undo when pods crash-loop.",
            "tags": ["#devops/k8s", "runbook", "runbook"],
            "links": [chunk["chunk_id"], journal_doc, chunk["chunk_id"]],
        },
    )
    assert "error" not in out, out
    assert out["source"] == "notes"
    assert out["path"] == "inbox/rollback-checklist-überblick.md"
    assert out["wiki_link"] == "[[inbox/rollback-checklist-überblick]]"
    assert out["links"] == [chunk["anchor"], "journal:2024-06-02.md"]
    assert out["searchable"] is True, out["indexing"]
    assert out["note"]["path"] == out["path"]
    assert out["note"]["title"] == "Rollback checklist: Überblick"

    text = (vault_of(index) / out["path"]).read_text(encoding="utf-8")
    front, body = text.removeprefix("---\n").split("---\n", 1)
    meta = yaml.safe_load(front)
    assert meta["title"] == "Rollback checklist: Überblick"
    assert meta["tags"] == ["devops/k8s", "runbook"]
    assert meta["source"] == "mcp remember"
    assert meta["user"] == "local"
    assert meta["links"] == out["links"]
    assert "T" in meta["created"] and meta["created"][:4].isdigit()
    assert "**zanzibarquokka**" in body
    assert f"- {chunk['anchor']}\n" in body
    assert "- journal:2024-06-02.md — 2024-06-02\n" in body

    hits = call(index, "search", {"query": "zanzibarquokka", "k": 3})["hits"]
    assert hits and hits[0]["path"] == out["path"]
    tagged = call(index, "search", {"query": "rollback", "tags": ["runbook"], "k": 3})["hits"]
    assert [h["path"] for h in tagged] == [out["path"]]


def test_a_taken_name_gets_a_new_one_and_nothing_is_overwritten(index: RaglineConfig) -> None:
    first = call(index, "remember", {"title": "Same title", "body": "first", "wait_seconds": 0})
    second = call(index, "remember", {"title": "Same title", "body": "second", "wait_seconds": 0})
    assert first["path"] == "inbox/same-title.md"
    assert second["path"] == "inbox/same-title-2.md"
    inbox = vault_of(index) / "inbox"
    assert "first" in (inbox / "same-title.md").read_text(encoding="utf-8")
    assert "second" in (inbox / "same-title-2.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("title", "name"),
    [
        ("../../outside/escape", "outside-escape.md"),
        ("/etc/passwd", "etc-passwd.md"),
        ("..", "note.md"),
        ("C:\\Windows\\evil", "c-windows-evil.md"),
        ("~/.ssh/authorized_keys", "ssh-authorized-keys.md"),
        (".hidden", "hidden.md"),
        ("CON", "con-note.md"),
    ],
)
def test_a_title_cannot_place_the_note_outside_its_folder(
    index: RaglineConfig, title: str, name: str
) -> None:
    before = notes_files(index)
    out = call(index, "remember", {"title": title, "body": "x", "wait_seconds": 0})
    assert "error" not in out, out
    assert out["path"].startswith("inbox/") and out["path"].count("/") == 1
    assert out["path"].removeprefix("inbox/").removesuffix(".md").startswith(name[:-3])
    added = notes_files(index) - before
    assert added == {f"vault/{out['path']}"}


def test_slugs_are_bounded_and_keep_any_script() -> None:
    assert file_slug("Заметка о Kubernetes 2024", "note") == "заметка-о-kubernetes-2024"
    assert file_slug("会议记录：部署", "note") == "会议记录-部署"
    assert file_slug("Café: “Déjà vu”!", "clip") == "café-déjà-vu"
    assert file_slug("CON", "note") == "con-note"
    assert file_slug("???", "note") == "note"
    assert len(file_slug("長" * 500, "note").encode()) <= MAX_SLUG_BYTES


def test_an_inbox_linked_outside_the_source_is_refused(index: RaglineConfig) -> None:
    vault = vault_of(index)
    outside = vault.parent / "outside"
    (vault / "linked-out").symlink_to(outside, target_is_directory=True)
    (vault / "linked-in").symlink_to(vault / "gardening", target_is_directory=True)
    refused = call(
        index.model_copy(update={"remember": RememberConfig(source="notes", folder="linked-out")}),
        "remember",
        {"title": "escape", "body": "x"},
    )
    assert "leads outside the source" in refused["error"]
    assert not list(outside.iterdir())
    inside = call(
        index.model_copy(update={"remember": RememberConfig(source="notes", folder="linked-in")}),
        "remember",
        {"title": "inside link", "body": "x", "wait_seconds": 0},
    )
    assert inside["path"] == "gardening/inside-link.md"  # where the link leads, in the vault


def test_bad_input_is_one_line_and_writes_nothing(index: RaglineConfig) -> None:
    before = notes_files(index)
    cases = {
        "the title is empty": {"title": "  "},
        "keep it on one line": {"title": "two\nlines"},
        f"keep it under {MAX_TITLE_CHARS}": {"title": "t" * (MAX_TITLE_CHARS + 1)},
        "is not a usable tag": {"title": "t", "tags": ["semi;colon"]},
        "21 tags given": {"title": "t", "tags": [f"t{i}" for i in range(21)]},
        "51 links given": {"title": "t", "links": [f"{i:016x}" for i in range(51)]},
        "link '0123456789abcdef' is no doc_id or chunk_id": {
            "title": "t",
            "links": ["0123456789abcdef"],
        },
        "characters long; the limit is 100000": {"title": "t", "body": "b" * 100_001},
    }
    for expected, arguments in cases.items():
        out = call(index, "remember", arguments)
        assert expected in out.get("error", ""), (expected, out)
        assert "\n" not in out["error"] and "Traceback" not in out["error"]
    assert notes_files(index) == before


def test_without_permission_or_inbox_the_error_names_the_setting(index: RaglineConfig) -> None:
    before = notes_files(index)
    no_write = index.model_copy(update={"mcp": index.mcp.model_copy(update={"stdio_write": False})})
    out = call(no_write, "remember", {"title": "t", "body": "b"})
    assert "stdio_write = true" in out["error"]
    no_inbox = index.model_copy(update={"remember": RememberConfig()})
    out = call(no_inbox, "remember", {"title": "t", "body": "b"})
    assert "[remember]" in out["error"] and "`source`" in out["error"]
    not_notes = index.model_copy(update={"remember": RememberConfig(source="nope")})
    assert "not a configured source" in call(not_notes, "remember", {"title": "t"})["error"]
    assert notes_files(index) == before


def test_the_tool_is_only_listed_when_configured(index: RaglineConfig) -> None:
    plain = index.model_copy(
        update={
            "remember": RememberConfig(),
            "mcp": index.mcp.model_copy(update={"stdio_write": False}),
        }
    )

    async def names(config: RaglineConfig) -> set[str]:
        async with Client(build_server(config)) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert "remember" not in anyio.run(names, plain)
    assert "remember" in anyio.run(names, index)


# ---- over HTTP, with tokens ----------------------------------------------------------


@pytest.fixture(scope="module")
def url(index: RaglineConfig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("remember-http")
    tokens = [
        {"user": "writer", "token": WRITER, "sources": ["notes"], "write": True},
        {"user": "reader", "token": READER, "sources": ["notes"]},
        {"user": "stranger", "token": STRANGER, "sources": ["journal"], "write": True},
    ]
    config_path = write_config(
        directory,
        vault_of(index),
        journal_of(index),
        index.data_dir,
        mcp={"tokens": tokens},
        remember={"source": "notes", "folder": "inbox"},
    )
    with http_mcp_server(config_path, directory / "stderr.log") as url:
        yield url


def test_over_http_a_token_without_write_is_refused(index: RaglineConfig, url: str) -> None:
    before = notes_files(index)
    out = http_call(url, READER, "remember", {"title": "from reader", "body": "b"})
    assert "write = true" in out["error"] and "[[mcp.tokens]]" in out["error"]
    assert notes_files(index) == before


def test_over_http_a_token_learns_nothing_of_sources_it_cannot_see(
    index: RaglineConfig, url: str
) -> None:
    before = notes_files(index)
    journal_doc = first_hit(index, "quinces market", "journal")
    out = http_call(url, WRITER, "remember", {"title": "leak", "links": [journal_doc["chunk_id"]]})
    assert "is no doc_id or chunk_id you can see" in out["error"]
    assert "journal" not in out["error"] and "2024-06-02" not in out["error"]
    # A writer who cannot see the inbox's source is not told its name.
    out = http_call(url, STRANGER, "remember", {"title": "elsewhere", "body": "b"})
    assert "cannot see the notes inbox" in out["error"] and "notes'" not in out["error"]
    assert notes_files(index) == before

    compost = first_hit(index, "turn the heap", "notes")["doc_id"]
    arguments = {"title": "From the writer", "body": "b", "links": [compost]}
    saved = http_call(url, WRITER, "remember", arguments)
    assert saved["path"] == "inbox/from-the-writer.md", saved
    assert saved["links"] == ["[[gardening/Compost]]"]
    assert saved["searchable"] is True, saved["indexing"]
    text = (vault_of(index) / saved["path"]).read_text(encoding="utf-8")
    assert yaml.safe_load(text.split("---\n")[1])["user"] == "writer"


# ---- over stdio ------------------------------------------------------------------------


def test_over_stdio_without_stdio_write_nothing_is_saved(
    index: RaglineConfig, tmp_path: Path
) -> None:
    config_path = write_config(
        tmp_path,
        vault_of(index),
        journal_of(index),
        index.data_dir,
        remember={"source": "notes", "folder": "inbox"},
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ragline.cli", "--config", str(config_path), "mcp"],
        env={"HF_HUB_OFFLINE": "1", "PATH": os.environ.get("PATH", "")},
    )
    before = notes_files(index)

    async def run() -> Any:
        async with Client(params, read_timeout_seconds=60) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            return tools, await client.call_tool("remember", {"title": "t", "body": "b"})

    tools, result = anyio.run(run)
    assert "remember" in tools
    assert result.is_error and "stdio_write = true" in result.content[0].text
    assert notes_files(index) == before
