"""`ragline mcp --http` in a real subprocess: bearer tokens, per-user source visibility,
DNS-rebinding protection. The server reads the shared sample index (never writes)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from rag_serving.config import RaglineConfig
from tests.mcp_http_server import http_mcp_server

ALICE = "alice-token-0123456789abcdef"  # notes only
BOB = "bob-token-fedcba9876543210xyz"  # journal only, given through an environment variable
CAROL = "carol-token-everything-0123456"  # every source


def write_token_config(directory: Path, config: RaglineConfig) -> Path:
    """A config over the sample index's data dir and sources, plus [mcp] tokens."""
    import tomli_w

    sources = [
        {"name": s.name, "kind": s.kind, "path": str(s.path), "exclude": list(s.exclude)}
        for s in config.sources
    ]
    payload = {
        "data_dir": str(config.data_dir),
        "sources": sources,
        "mcp": {
            "tokens": [
                {"user": "alice", "token": ALICE, "sources": ["notes"]},
                {"user": "bob", "token_env": "RAGLINE_TEST_BOB_TOKEN", "sources": ["journal"]},
                {"user": "carol", "token": CAROL, "sources": ["*"]},
            ]
        },
    }
    path = directory / "ragline.toml"
    path.write_bytes(tomli_w.dumps(payload).encode())
    return path


@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the server writes its log (stderr): a file, which never fills up as a
    pipe nobody reads would."""
    return tmp_path_factory.mktemp("mcp-http-log") / "stderr.log"


@pytest.fixture(scope="module")
def url(
    sample_index: RaglineConfig, tmp_path_factory: pytest.TempPathFactory, server_log: Path
) -> Iterator[str]:
    config = write_token_config(tmp_path_factory.mktemp("mcp-http"), sample_index)
    env = dict(os.environ, RAGLINE_TEST_BOB_TOKEN=BOB)
    with http_mcp_server(config, server_log, env) as url:
        yield url


def call(url: str, token: str, name: str, arguments: dict[str, Any], mode: str = "auto") -> Any:
    """Call one tool over HTTP as the holder of ``token``."""

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            result = await client.call_tool(name, arguments)
        if result.is_error:
            return {"error": result.content[0].text}
        return result.structured_content

    return anyio.run(run)


def post(url: str, headers: dict[str, str]) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream", **headers}
    return httpx2.post(url, json=body, headers=accept, timeout=30)


def test_missing_or_wrong_token_is_401(url: str) -> None:
    assert post(url, {}).status_code == 401
    wrong = post(url, {"Authorization": "Bearer alice-token-0123456789abcdeX"})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"].startswith("Bearer")
    assert post(url, {"Authorization": f"Basic {ALICE}"}).status_code == 401


def test_a_refused_token_says_why_in_one_line(url: str) -> None:
    """The SDK's "invalid_token: Authentication required" reads as an OAuth problem to a
    user whose client simply sent no token."""
    cases = {
        "missing bearer token: send the header `Authorization: Bearer <token>`": {},
        "unknown bearer token: it matches no [[mcp.tokens]] entry": {
            "Authorization": "Bearer alice-token-0123456789abcdeX"
        },
        "malformed Authorization header: it uses the 'Basic' scheme; send `Authorization: "
        "Bearer <token>`": {"Authorization": f"Basic {ALICE}"},
    }
    for reason, headers in cases.items():
        refused = post(url, headers)
        assert refused.status_code == 401
        body = refused.json()
        assert body["error"] == "invalid_token" and body["error_description"].startswith(reason)
        assert reason in refused.headers["www-authenticate"]
        assert "alice-token" not in refused.text  # the secret is never echoed


def test_a_header_without_a_scheme_is_not_echoed(url: str) -> None:
    """A client that sends the bare secret (no "Bearer ") must not see it, or its first
    characters, quoted back as a "scheme"."""
    refused = post(url, {"Authorization": ALICE})
    assert refused.status_code == 401
    reason = refused.json()["error_description"]
    assert reason.startswith("malformed Authorization header: it does not start with `Bearer `")
    assert "alice" not in refused.text and "alice" not in refused.headers["www-authenticate"]


def test_each_refused_request_is_logged_with_its_reason_never_the_token(
    url: str, server_log: Path
) -> None:
    """Clients show "Failed to connect" for a 401; the server's log must say why."""
    sent = {
        "missing bearer token": {},
        "unknown bearer token": {"Authorization": "Bearer alice-token-0123456789abcdeX"},
        "malformed Authorization header: it uses the 'Basic' scheme": {
            "Authorization": f"Basic {ALICE}"
        },
        "malformed Authorization header: it does not start with": {"Authorization": ALICE},
        "malformed Authorization header: the token is in quotes": {
            "Authorization": f'Bearer "{ALICE}"'
        },
        "malformed Authorization header: the token is an unexpanded shell variable": {
            "Authorization": "Bearer $RAGLINE_MCP_TOKEN"
        },
    }
    for headers in sent.values():
        assert post(url, headers).status_code == 401
    deadline = time.monotonic() + 10
    while True:
        log = " ".join(server_log.read_text(errors="replace").split())
        missing = [r for r in sent if f"refused POST /mcp from 127.0.0.1: {r}" not in log]
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not missing, log[-3000:]
    for secret in (ALICE, "alice-token", "0123456789abcdeX", "RAGLINE_MCP_TOKEN"):
        assert secret not in log, secret


def test_a_failed_file_is_explained_only_to_those_who_see_its_source(url: str) -> None:
    opened = call(url, ALICE, "open", {"source": "notes", "path": "invalid utf8.md"})["error"]
    assert opened.startswith("open: notes:invalid utf8.md failed to index: not valid UTF-8")
    hidden = call(url, BOB, "open", {"source": "notes", "path": "invalid utf8.md"})["error"]
    unknown = call(url, BOB, "open", {"source": "zzzzz", "path": "invalid utf8.md"})["error"]
    assert _masked(hidden, "notes") == _masked(unknown, "zzzzz")


def test_dns_rebinding_protection_stays_on(url: str) -> None:
    evil = post(url, {"Authorization": f"Bearer {ALICE}", "Host": "evil.example:80"})
    assert evil.status_code == 421
    origin = post(url, {"Authorization": f"Bearer {ALICE}", "Origin": "http://evil.example"})
    assert origin.status_code == 403


def test_each_token_sees_only_its_sources(url: str) -> None:
    names = lambda token: {s["name"] for s in call(url, token, "list_sources", {})["sources"]}  # noqa: E731
    assert names(ALICE) == {"notes"}
    assert names(BOB) == {"journal"}
    assert names(CAROL) == {"notes", "journal"}
    status = call(url, ALICE, "status", {})
    assert [s["name"] for s in status["sources"]] == ["notes"]
    assert all(s["path"] is None for s in status["sources"])  # no server paths over HTTP

    hits = call(url, ALICE, "search", {"query": "glacier hiking borrow checker", "k": 10})["hits"]
    assert {h["source"] for h in hits} <= {"notes"}
    hits = call(url, BOB, "search", {"query": "glacier hiking", "k": 10})["hits"]
    assert hits and {h["source"] for h in hits} == {"journal"}


def test_legacy_sessions_keep_each_users_access(url: str) -> None:
    """The handshake-era transport (a session per client) resolves the same users."""
    for token, expected in ((ALICE, ["notes"]), (BOB, ["journal"])):
        out = call(url, token, "list_sources", {}, mode="legacy")
        assert [s["name"] for s in out["sources"]] == expected


def _masked(error: str, name: str) -> str:
    return error.replace(name, "NAME")


def test_an_invisible_source_fails_exactly_like_an_unknown_one(url: str) -> None:
    hidden = call(url, ALICE, "search", {"query": "rust", "sources": ["journal"]})["error"]
    unknown = call(url, ALICE, "search", {"query": "rust", "sources": ["zzzzzzz"]})["error"]
    assert "unknown source 'journal'" in hidden
    assert _masked(hidden, "journal") == _masked(unknown, "zzzzzzz")
    # A tag only the invisible source has is unknown too, and never suggested.
    tag = call(url, ALICE, "search", {"query": "rust", "tags": ["programming"]})["error"]
    assert "unknown tag 'programming'" in tag and "journal" not in tag
    near = call(url, ALICE, "search", {"query": "x", "sources": ["journl"]})["error"]
    assert "journal" not in near.replace("journl", "")
    reindex = call(url, ALICE, "reindex", {"source": "journal"})["error"]
    assert _masked(reindex, "journal") == _masked(
        call(url, ALICE, "reindex", {"source": "zzzzzzz"})["error"], "zzzzzzz"
    )


def test_another_users_document_cannot_be_opened(url: str) -> None:
    hit = call(url, BOB, "search", {"query": "borrow checker", "k": 1})["hits"][0]
    assert hit["source"] == "journal"
    fake = "0123456789abcdef0123456789abcdef"
    for key in (hit["doc_id"], hit["chunk_id"]):
        for tool in ("open", "neighbors"):
            denied = call(url, ALICE, tool, {"id": key})["error"]
            assert _masked(denied, key) == _masked(
                call(url, ALICE, tool, {"id": fake})["error"], fake
            )
    by_path = call(url, ALICE, "open", {"source": "journal", "path": hit["path"]})["error"]
    unknown = call(url, ALICE, "open", {"source": "zzzzzzz", "path": hit["path"]})["error"]
    assert _masked(by_path, "journal") == _masked(unknown, "zzzzzzz")
    # The owner can open it, by id and by path.
    assert call(url, BOB, "open", {"id": hit["doc_id"]})["source"] == "journal"
    assert (
        call(url, BOB, "open", {"source": "journal", "path": hit["path"]})["doc_id"]
        == hit["doc_id"]
    )


def test_links_stay_within_visible_sources(url: str) -> None:
    out = call(url, ALICE, "neighbors", {"source": "notes", "path": "finance/Budget.md"})
    assert out["links"][0]["resolved"]["path"] == "Sourdough starter.md"
    sources = {b["source_note"]["source"] for b in out["backlinks"]}
    assert sources <= {"notes"}
