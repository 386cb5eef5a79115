"""`ragline clip` and the MCP `clip` tool (issue 30): real pages and a real PDF from
../shared/data served on 127.0.0.1 (the feeds' test server), clipped into a small
vault, indexed through the real stack and found by search when the command returns.
Auto-tags talk to the Ollama stand-in (tests/ollama_standin.py), a named stand-in:
no Ollama server can be installed here."""

from __future__ import annotations

import json
import re
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.search import SearchEngine, SearchFilters
from rag_sources.clipping.download import ClipError, download
from rag_sources.errors import ConfigError
from ragline.cli import cli
from tests.conftest import SHARED_DATA
from tests.feed_server import FeedServer, lan_address
from tests.mcp_http_server import http_mcp_server
from tests.ollama_standin import CHAT_MODEL, OllamaStandIn

pytestmark = pytest.mark.shared_data

EPUB = SHARED_DATA / "corpora" / "epub"
PDF = SHARED_DATA / "corpora" / "pdf" / "docling-samples" / "multi_page.pdf"
READER = "reader-token-0123456789abcdef"  # may search, not write
WRITER = "writer-token-fedcba9876543210"  # write = true
CANONICAL = "https://idpf.example/epub3/terminology"
MAX_BYTES = 1_000_000


def epub_page(book: str, name: str) -> bytes:
    """A real XHTML page of an EPUB book (IDPF's EPUB 3 spec, a Creative Commons book)."""
    with zipfile.ZipFile(EPUB / book) as archive:
        return archive.read(name)


def with_head(page: bytes, head: str) -> bytes:
    """``page`` with ``head`` added to its <head> (the metadata web pages carry)."""
    return page.replace(b"</head>", head.encode() + b"</head>", 1)


TERMINOLOGY_HEAD = f"""
<link rel="canonical" href="{CANONICAL}"/>
<meta property="og:title" content="EPUB 3 Terminology"/>
<meta name="author" content="IDPF EPUB Working Group"/>
<meta property="article:published_time" content="2011-10-11T00:00:00Z"/>
<script type="application/ld+json">{{"@context": "https://schema.org", "@type": "TechArticle",
 "headline": "EPUB 3 Terminology", "author": {{"@type": "Organization",
 "name": "International Digital Publishing Forum"}}, "datePublished": "2011-10-11"}}</script>
"""


@pytest.fixture(scope="module")
def site() -> Iterator[FeedServer]:
    with FeedServer() as server:
        terminology = epub_page("epub30-spec.epub", "EPUB/xhtml/epub30-terminology.xhtml")
        server.put("/spec/terminology.html", with_head(terminology, TERMINOLOGY_HEAD), "text/html")
        for n in ("10", "20", "30", "40"):
            page = epub_page("cc-shared-culture.epub", f"EPUB/xhtml/p{n}.xhtml")
            server.put(f"/culture/p{n}.html", page, "application/xhtml+xml")
        server.redirects["/go/culture"] = "/culture/p10.html"
        server.put("/papers/multi_page.pdf", PDF.read_bytes(), "application/pdf")
        server.put("/slow.html", b"<html><body><p>late</p></body></html>", "text/html", delay_s=3)
        server.put("/huge.html", b"<html><body>" + b"<p>x</p>" * 200_000, "text/html")
        server.put("/data.json", b'{"a": 1}', "application/json")
        yield server


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small vault whose notes carry the tags auto-tagging should prefer."""
    root = tmp_path_factory.mktemp("clip-vault")
    (root / "standards.md").write_text(
        "---\ntags: [standards, ebooks]\n---\n# Publishing standards\n\nNotes on formats.\n"
    )
    (root / "reading.md").write_text("---\ntags: [reading]\n---\n# Reading list\n\nBooks.\n")
    return root


def write_config(root: Path, vault: Path, data_dir: Path, **sections: Any) -> Path:
    import tomli_w

    payload: dict[str, Any] = {
        "data_dir": str(data_dir),
        "sources": [
            {"name": "vault", "kind": "markdown", "path": str(vault)},
            {"name": "books", "kind": "documents", "path": str(vault)},
        ],
        "clip": {"source": "vault", "timeout_s": 1.0, "max_bytes": MAX_BYTES},
    }
    for name, values in sections.items():
        payload[name] = {**payload.get(name, {}), **values}
    root.mkdir(parents=True, exist_ok=True)
    path = root / "ragline.toml"
    path.write_bytes(tomli_w.dumps(payload).encode())
    return path


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, vault: Path) -> RaglineConfig:
    root = tmp_path_factory.mktemp("clip-index")
    config_path = write_config(root, vault, root / "data")
    config = parse_config_file(config_path)
    from ragline.indexing import index_sources

    outcomes = index_sources(config, ["vault"], False)
    assert all(o.success for o in outcomes), [o.error for o in outcomes]
    return config


def config_with(config: RaglineConfig, vault: Path, tmp_path: Path, **sections: Any) -> Path:
    """A config over the same index and vault with other settings."""
    return write_config(tmp_path / "cfg", vault, config.data_dir, **sections)


def run_cli(config_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["--config", str(config_path), "clip", *args], env={"COLUMNS": "300"}
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def frontmatter(path: Path) -> dict[str, Any]:
    match = re.match(r"---\n(.*?)\n---\n", path.read_text(encoding="utf-8"), re.DOTALL)
    assert match, path.read_text()[:300]
    return yaml.safe_load(match.group(1))


def search(config: RaglineConfig, query: str, **filters: Any) -> list[Any]:
    engine = SearchEngine(config)
    return engine.search(query, k=10, filters=SearchFilters(**filters)).hits


def clips(vault: Path) -> list[str]:
    folder = vault / "clippings"
    return sorted(p.relative_to(vault).as_posix() for p in folder.rglob("*") if p.is_file())


# ---- a page, a PDF, the same URL twice -----------------------------------------------


def test_a_page_is_saved_with_its_metadata_and_searchable_at_once(
    indexed: RaglineConfig, site: FeedServer, vault: Path
) -> None:
    url = site.url("/spec/terminology.html")
    code, output = run_cli(indexed.config_path, url, "--tags", "Spec, #reading", "--json")
    assert code == 0, output
    result = json.loads(output)
    month = time.strftime("%Y-%m", time.gmtime())
    assert result["path"] == f"clippings/{month}/epub-3-terminology.md"
    assert result["indexed"]["success"] is True and result["duplicate"] is False
    note = vault / result["path"]
    meta = frontmatter(note)
    assert meta["url"] == url
    assert meta["canonical_url"] == CANONICAL
    assert meta["title"] == "EPUB 3 Terminology"  # JSON-LD's headline
    assert meta["author"] == "International Digital Publishing Forum"
    assert meta["published"] == "2011-10-11"
    assert meta["fetched"].startswith(time.strftime("%Y-%m-%d", time.gmtime()))
    assert meta["tags"] == ["spec", "reading"]
    text = note.read_text()
    assert "EPUB Container (or Container)" in text and "<dd>" not in text
    # searchable when the command returned, with its tags as the tags filter
    hits = search(indexed, "ZIP-based packaging and distribution format", tags=("spec",))
    assert hits and hits[0].path == result["path"] and hits[0].source == "vault"

    # The same URL again, or its canonical URL: nothing fetched or saved, the first copy named.
    before, asked = clips(vault), len(site.requests_for("/spec/terminology.html"))
    code, output = run_cli(indexed.config_path, url)
    assert code == 0 and "Already clipped" in output and result["path"] in output
    assert len(site.requests_for("/spec/terminology.html")) == asked
    site.redirects["/canonical-alias"] = "/spec/terminology.html"
    code, output = run_cli(indexed.config_path, site.url("/canonical-alias"), "--json")
    assert json.loads(output)["duplicate"] is True and json.loads(output)["path"] == result["path"]
    assert clips(vault) == before


def test_a_pdf_is_kept_as_a_pdf_beside_a_note(
    indexed: RaglineConfig, site: FeedServer, vault: Path
) -> None:
    code, output = run_cli(indexed.config_path, site.url("/papers/multi_page.pdf"))
    assert code == 0, output
    assert "Searchable now" in output
    [note] = [p for p in clips(vault) if p.endswith("multi-page.md")]
    [pdf] = [p for p in clips(vault) if p.endswith(".pdf")]
    assert (vault / pdf).read_bytes() == PDF.read_bytes()
    assert f"![[{Path(pdf).name}]]" in (vault / note).read_text()
    assert frontmatter(vault / note)["url"] == site.url("/papers/multi_page.pdf")
    hits = search(indexed, "invention of the typewriter word processing")
    assert any(hit.path == pdf for hit in hits), [h.path for h in hits]


def test_a_clash_of_names_gets_a_suffix_and_nothing_is_overwritten(
    indexed: RaglineConfig, site: FeedServer, vault: Path, tmp_path: Path
) -> None:
    from rag_sources.clipping.archive import save
    from rag_sources.clipping.extract import Extracted

    clip = Extracted(title="Same title", canonical_url="https://a.example/", body="Body.")
    when = __import__("datetime").datetime(2020, 5, 1)
    first = save(tmp_path, "clips", clip, "https://a.example/", when, [])
    second = save(tmp_path, "clips", clip, "https://b.example/", when, [])
    assert (first.note, second.note) == (
        "clips/2020-05/same-title.md",
        "clips/2020-05/same-title-2.md",
    )
    assert "https://a.example/" in (tmp_path / first.note).read_text()


# ---- bad input: one line, nothing saved ---------------------------------------------


def test_fetch_problems_are_one_line_errors(site: FeedServer) -> None:
    def refused(url: str, **kw: Any) -> str:
        with pytest.raises(ClipError) as error:
            download(url, timeout=kw.pop("timeout", 1.0), max_bytes=MAX_BYTES, **kw)
        message = str(error.value)
        assert "\n" not in message and message.startswith(url), message
        return message

    assert "HTTP 404 Not Found; check the URL" in refused(site.url("/missing.html"))
    assert "no answer within 1 s" in refused(site.url("/slow.html"))
    assert "raise [clip] timeout_s" in refused(site.url("/slow.html"))
    assert "larger than [clip] max_bytes = 1,000,000" in refused(site.url("/huge.html"))
    assert "application/json, not a web page (HTML) or a PDF" in refused(site.url("/data.json"))
    assert "not a web address" in refused("ftp://example.org/page.html")
    followed = download(site.url("/go/culture"), timeout=2, max_bytes=MAX_BYTES)
    assert followed.final_url == site.url("/culture/p10.html") and followed.kind == "html"


def test_a_page_elsewhere_may_not_redirect_into_this_machine(site: FeedServer) -> None:
    with FeedServer(host=lan_address()) as lan:
        lan.redirects["/innocent.html"] = site.url("/spec/terminology.html")
        with pytest.raises(ClipError, match="refused to connect to") as error:
            download(lan.url("/innocent.html"), timeout=2, max_bytes=MAX_BYTES)
        assert "loopback" in str(error.value) and "private-network" in str(error.value)


def test_the_cli_reports_bad_input_in_one_line_and_saves_nothing(
    indexed: RaglineConfig, site: FeedServer, vault: Path, tmp_path: Path
) -> None:
    before = clips(vault)
    code, output = run_cli(indexed.config_path, site.url("/missing.html"))
    assert code == 1 and output.startswith("error: ") and output.count("\n") == 1, output
    local = tmp_path / "notes.txt"
    local.write_text("plain words")
    code, output = run_cli(indexed.config_path, str(local))
    assert code == 1 and "not a web page (HTML) or a PDF" in output
    code, output = run_cli(indexed.config_path, str(tmp_path / "gone.html"))
    assert code == 1 and "no such file" in output
    code, output = run_cli(indexed.config_path, site.url("/culture/p20.html"), "--tags", "a b,12")
    assert code == 1 and "'12' is not a usable tag" in output
    assert clips(vault) == before


def test_a_clip_source_must_be_a_configured_source_of_notes(
    indexed: RaglineConfig, vault: Path, tmp_path: Path, site: FeedServer
) -> None:
    from rag_serving.clipping import clip_target

    url = site.url("/culture/p20.html")
    for clip_settings, expected in (
        ({"source": "nowhere"}, "[clip] source: unknown source 'nowhere'"),
        ({"source": "books"}, "[clip] source = 'books': that source does not hold Markdown"),
        ({"folder": "x", "source": "vault"}, None),
    ):
        path = config_with(indexed, vault, tmp_path, clip=clip_settings)
        if expected is None:
            assert clip_target(parse_config_file(path)).folder == "x"
            continue
        code, output = run_cli(path, url)
        assert code == 2 and expected in output and output.count("\n") == 1, output
    unset = write_config(tmp_path / "unset", vault, indexed.data_dir)
    text = unset.read_text().replace('source = "vault"\n', "", 1)
    unset.write_text(text)
    with pytest.raises(ConfigError, match=r"set \[clip\] source"):
        clip_target(parse_config_file(unset))


# ---- auto-tags ---------------------------------------------------------------------


def test_auto_tags_prefer_the_index_tags_and_reach_the_tags_filter(
    indexed: RaglineConfig, site: FeedServer, vault: Path, tmp_path: Path
) -> None:
    reply = '{"tags": ["ebooks", "Creative Commons", "!!"]}'
    with OllamaStandIn(chat_reply=lambda messages, schema: reply) as standin:
        path = config_with(
            indexed, vault, tmp_path,
            clip={"auto_tags": True}, llm={"host": standin.host, "model": CHAT_MODEL},
        )  # fmt: skip
        code, output = run_cli(path, site.url("/culture/p30.html"), "--tags", "video", "--json")
        assert code == 0, output
        [request] = standin.chat_requests
    result = json.loads(output)
    prompt = json.dumps(request.body["messages"])
    assert "standards" in prompt and "ebooks" in prompt and "reading" in prompt
    assert request.body["format"]["properties"]["tags"]["type"] == "array"
    assert result["tags"] == ["video", "ebooks", "creative-commons"]
    assert "auto-tags from 'standin-chat'" in result["tagging"]
    assert frontmatter(vault / result["path"])["tags"] == ["video", "ebooks", "creative-commons"]
    hits = search(indexed, "creative commons", tags=("creative-commons",))
    assert {h.path for h in hits} == {result["path"]}


def test_clipping_goes_on_when_the_model_is_down(
    indexed: RaglineConfig, site: FeedServer, vault: Path, tmp_path: Path
) -> None:
    standin = OllamaStandIn().start()
    host = standin.host
    standin.stop()
    path = config_with(
        indexed, vault, tmp_path, clip={"auto_tags": True}, llm={"host": host, "model": CHAT_MODEL}
    )
    code, output = run_cli(path, site.url("/culture/p40.html"))
    assert code == 0, output
    assert f"auto-tags skipped: no Ollama server answers at {host}" in output
    assert "Searchable now" in output


# ---- the MCP tool ------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_url(
    indexed: RaglineConfig, vault: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    root = tmp_path_factory.mktemp("clip-mcp")
    tokens = [
        {"user": "reader", "token": READER, "sources": ["*"]},
        {"user": "writer", "token": WRITER, "sources": ["*"], "write": True},
    ]
    config = write_config(
        root, vault, indexed.data_dir, clip={"allow_hosts": ["127.0.0.1"]}, mcp={"tokens": tokens}
    )
    with http_mcp_server(config, root / "stderr.log") as url:
        yield url


def test_the_mcp_tool_needs_write_permission_over_http(
    mcp_url: str, indexed: RaglineConfig, site: FeedServer, vault: Path
) -> None:
    from tests.test_mcp_http import call

    url = site.url("/go/culture")
    before = clips(vault)
    refused = call(mcp_url, READER, "clip", {"url": url})
    assert "may not clip" in refused["error"]
    assert "write = true" in refused["error"] and "\n" not in refused["error"]
    assert clips(vault) == before
    local = call(mcp_url, WRITER, "clip", {"url": str(vault / "reading.md")})
    assert "only http(s) URLs" in local["error"] and str(vault) not in local["error"]

    saved = call(mcp_url, WRITER, "clip", {"url": url, "tags": ["film"], "wait_seconds": 120})
    assert saved.get("error") is None, saved
    assert saved["indexed"] is True and saved["duplicate"] is False, saved
    assert saved["url"] == url and saved["tags"] == ["film"]
    hits = search(indexed, "Jesse Dylan short video fundraising", tags=("film",))
    assert {h.path for h in hits} == {saved["path"]}
    again = call(mcp_url, WRITER, "clip", {"url": site.url("/culture/p10.html")})
    assert again["duplicate"] is True and again["path"] == saved["path"]


def test_an_agent_may_not_clip_this_machine_unless_its_host_is_allowed(
    indexed: RaglineConfig, vault: Path, tmp_path: Path, site: FeedServer
) -> None:
    from rag_serving.mcp.clip_tool import ClipRefused, agent_reach
    from rag_sources.net.network import LOCAL

    config = parse_config_file(config_with(indexed, vault, tmp_path))
    with pytest.raises(ClipRefused, match=r"\[clip\] allow_hosts"):
        agent_reach(config, site.url("/culture/p10.html"))
    allowed = config.model_copy(
        update={"clip": config.clip.model_copy(update={"allow_hosts": ["127.0.0.1"]})}
    )
    assert agent_reach(allowed, site.url("/culture/p10.html")) == LOCAL
