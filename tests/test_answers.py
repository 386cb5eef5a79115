"""After retrieval: hits grown to their sections within a budget (`search --context`,
MCP `expand`), and `ragline ask` with every citation checked.

The index is real (the Obsidian help slice, a real PDF); the language model is the
Ollama STAND-IN of tests/ollama_standin.py (no Ollama can run here), whose "answers"
each test writes from the prompt it receives, so that what is checked is ragline's
side: the prompt, the streaming, the mapping of [n] to hits and the verdicts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import tomli_w
from mcp import Client

from rag_serving.answers.citations import content_words, split_sentences
from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.reading.excerpts import Body
from tests.conftest import SHARED_DATA, build_index, write_config
from tests.ollama_standin import CHAT_MODEL, OllamaStandIn

REPO = Path(__file__).resolve().parents[1]
QUESTION = "How do I link to a heading in another note?"
FEDERAL_REGISTER = (
    SHARED_DATA / "corpora" / "pdf" / "real-world" / "federal-register-2020-17221.pdf"
)
pytestmark = pytest.mark.shared_data


def _document(engine: Any, doc_id: str) -> dict[str, Any]:
    [row] = engine.store.read("documents", where=f"doc_id = '{doc_id}'").to_pylist()
    return row


def test_hits_grow_to_their_sections_within_one_shared_budget(
    help_index: RaglineConfig, engine_for: Any
) -> None:
    engine = engine_for(help_index)
    budget = 3000
    result = engine.search(QUESTION, k=6, context=budget)
    contexts = [hit.context for hit in result.hits]
    assert all(c is not None for c in contexts[:2])
    assert sum(len(c.text) for c in contexts if c) <= budget
    given = [hit for hit in result.hits if hit.context and hit.context.text]
    assert len(given) >= 2, "the first hit took the whole budget"
    ranks = {hit.chunk_id: hit.rank for hit in result.hits}
    for hit in result.hits:
        context = hit.context
        if context is None:
            continue
        # the hit's own lines are inside its context...
        assert context.line_start <= hit.line_start and hit.line_end <= context.line_end
        if context.same_as is not None:  # ...or inside a better hit's
            assert ranks[context.same_as] < hit.rank and context.text == ""
            continue
        # ...which never leaves the innermost heading section that holds the hit
        doc = _document(engine, hit.doc_id)
        body = Body.of(doc["body"], doc["body_start_line"], doc["sections_json"])
        sections = [
            s
            for s in body.sections()
            if s.line_start <= hit.line_start <= hit.line_end <= s.line_end
        ]
        if sections:
            inner = max(sections, key=lambda s: s.line_start)
            assert context.section == inner.title
            assert inner.line_start <= context.line_start <= context.line_end <= inner.line_end
        assert len(context.text) > len(hit.snippet) // 2


def test_a_large_budget_gives_the_whole_section(help_index: RaglineConfig, engine_for: Any) -> None:
    engine = engine_for(help_index)
    [hit] = engine.search(QUESTION, k=1, context=50_000).hits
    context = hit.context
    assert context is not None and context.complete
    doc = _document(engine, hit.doc_id)
    body = Body.of(doc["body"], doc["body_start_line"], doc["sections_json"])
    whole = body.cut(context.line_start, context.line_end, 10_000).text
    assert " ".join(context.text.split()) == " ".join(whole.split())


def test_page_furniture_is_left_out_of_a_pdf_page(tmp_path: Path, engine_for: Any) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / FEDERAL_REGISTER.name).write_bytes(FEDERAL_REGISTER.read_bytes())
    config = build_index(write_config(tmp_path, [
        {"name": "papers", "kind": "documents", "path": str(folder)}
    ]))  # fmt: skip
    engine = engine_for(config)
    hits = engine.search("proposed rule comments", k=3, context=20_000).hits
    [hit] = hits[:1]
    assert hit.context is not None and hit.context.section.startswith("Page ")
    body = _document(engine, hit.doc_id)["body"]
    furniture = "jbell on DSKJLSW7X2PROD with PROPOSALS"
    assert body.count(furniture) >= 10  # a running line on every page of the file...
    assert furniture not in hit.context.text  # ...left out of the page's context
    assert len(hit.context.text) > 1000


def test_search_context_in_the_cli_and_mcp_expand(help_index: RaglineConfig) -> None:
    from rag_serving.mcp import build_server

    shown = _ragline(help_index, "search", QUESTION, "-k", "3", "--context", "2500")
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"lines \d+-\d+", shown.stdout) and "│" in shown.stdout

    async def run() -> Any:
        async with Client(build_server(help_index)) as client:
            result = await client.call_tool("search", {"query": QUESTION, "k": 3, "expand": 2500})
            return result.structured_content

    found = anyio.run(run)
    contexts = [h["context"] for h in found["hits"] if h.get("context")]
    assert contexts and sum(len(c["text"]) for c in contexts) <= 2500
    assert all(c["line_start"] <= c["line_end"] for c in contexts)


# ---- ask ---------------------------------------------------------------------------


def _excerpts(messages: list[dict[str, Any]]) -> dict[int, str]:
    """The numbered excerpts of the prompt the stand-in received."""
    user = messages[-1]["content"].split("Excerpts:\n\n", 1)[1].rsplit("\n\nQuestion:", 1)[0]
    blocks = re.split(r"\n\n(?=\[\d+\] )", user)
    return {int(b[1 : b.index("]")]): b.split("\n", 1)[1] for b in blocks}


def _honest_and_invented(messages: list[dict[str, Any]], schema: Any) -> str:
    """One sentence copied from excerpt 1 citing it, one invented citing [2], one
    claim without a citation, and a citation of an excerpt that was never given."""
    first = next(line for line in _excerpts(messages)[1].split("\n") if len(line.split()) >= 6)
    return (
        f"{first.strip().rstrip('.')} [1]. "
        "The moon is made of green cheese according to lunar surveys [2]. "
        "Penguins file their taxes every spring. "
        "Obsidian stores notes in a database [99]."
    )


def _ask_config(
    tmp_path: Path, base: RaglineConfig, standin: OllamaStandIn | None, **llm: Any
) -> Path:
    raw = tomli_w.dumps({
        "data_dir": str(base.data_dir),
        "llm": {**({"host": standin.host, "model": CHAT_MODEL} if standin else {}), **llm},
        "mcp": {"ask_tool": True},
        "sources": [s.model_dump(mode="json", exclude_none=True) for s in base.sources],
    })  # fmt: skip
    path = tmp_path / "ragline.toml"
    path.write_text(raw)
    return path


def _ragline(config: RaglineConfig | Path, *args: str, timeout: float = 120) -> Any:
    path = config if isinstance(config, Path) else config.config_path
    return subprocess.run(
        [sys.executable, "-m", "ragline.cli", "--config", str(path), *args],
        capture_output=True, text=True, cwd=REPO, timeout=timeout,
    )  # fmt: skip


def test_ask_answers_with_checked_citations(tmp_path: Path, help_index: RaglineConfig) -> None:
    with OllamaStandIn(chat_reply=_honest_and_invented) as standin:
        config = _ask_config(tmp_path, help_index, standin)
        done = _ragline(config, "ask", QUESTION, "--json")
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        [request] = standin.chat_requests
    prompt = request.body["messages"]
    assert QUESTION in prompt[-1]["content"] and "[n]" in prompt[0]["content"]
    excerpts = _excerpts(prompt)
    assert sorted(excerpts) == list(range(1, len(excerpts) + 1)) and len(excerpts) >= 2
    verdicts = [(s["cites"], s["verdict"]) for s in answer["sentences"]]
    assert verdicts == [
        ([1], "supported"), ([2], "unsupported"), ([], "uncited"), ([99], "unsupported")
    ]  # fmt: skip
    assert answer["verdict"] == {
        "supported": 1, "unsupported": 2, "uncited": 1, "all_supported": False
    }  # fmt: skip
    first = answer["sentences"][0]
    assert first["span"]["excerpt"] == 1 and first["lexical"] >= 0.9
    assert "99" in answer["sentences"][3]["reason"]
    # [1] maps to the hit it came from: a real note, its lines and location
    cited = {c["n"]: c for c in answer["citations"]}
    assert cited[1]["cited"] and cited[2]["cited"] and not cited.get(3, {"cited": False})["cited"]
    note = Path(help_index.sources[0].path) / cited[1]["path"]
    lines = note.read_text(encoding="utf-8").split("\n")
    start, end = cited[1]["lines"]
    span = answer["sentences"][0]["span"]
    assert start <= span["lines"][0] <= span["lines"][1] <= end
    assert span["text"].split("\n")[0].strip() in "\n".join(lines[start - 1 : end])
    assert answer["model"] == CHAT_MODEL and answer["timings_ms"]["retrieval"] > 0


def test_ask_streams_then_lists_sources_and_flags_claims(
    tmp_path: Path, help_index: RaglineConfig
) -> None:
    with OllamaStandIn(chat_reply=_honest_and_invented) as standin:
        done = _ragline(_ask_config(tmp_path, help_index, standin), "ask", QUESTION)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "green cheese" in out and "Sources" in out
    assert out.index("green cheese") < out.index("Sources")  # the answer first
    assert re.search(r"\[1\] .+help:", out)
    assert "1 supported, 2 unsupported, 1 without a citation" in out
    assert "✗ unsupported [2] The moon" in out and "✗ no citation" in out


def test_ask_without_a_model_fails_fast_with_a_setup_line(
    tmp_path: Path, help_index: RaglineConfig
) -> None:
    unset = _ragline(_ask_config(tmp_path, help_index, None), "ask", QUESTION)
    assert unset.returncode == 1
    assert unset.stderr.strip().count("\n") == 0 and "[llm] model" in unset.stderr
    started = time.monotonic()
    down = _ragline(
        _ask_config(tmp_path, help_index, None, host="http://127.0.0.1:9", model=CHAT_MODEL),
        "ask", QUESTION,
    )  # fmt: skip
    assert down.returncode == 1 and "no Ollama server answers at http://127.0.0.1:9" in down.stderr
    assert time.monotonic() - started < 60
    with OllamaStandIn(chat_piece_delay_s=3.0) as slow:
        stalled = _ragline(
            _ask_config(tmp_path, help_index, slow, read_timeout_s=0.5), "ask", QUESTION
        )
    assert stalled.returncode == 1 and "sent nothing for 0.5 s" in stalled.stderr
    with OllamaStandIn() as standin:
        unknown = _ragline(
            _ask_config(tmp_path, help_index, standin, model="llama9"), "ask", QUESTION
        )
    assert unknown.returncode == 1 and "ollama pull llama9" in unknown.stderr


def test_the_mcp_ask_tool_is_offered_when_configured(
    tmp_path: Path, help_index: RaglineConfig
) -> None:
    from rag_serving.mcp import build_server

    with OllamaStandIn(chat_reply=_honest_and_invented) as standin:
        config = parse_config_file(_ask_config(tmp_path, help_index, standin))

        async def run() -> tuple[list[str], Any]:
            async with Client(build_server(config)) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                result = await client.call_tool("ask", {"question": QUESTION, "k": 4})
                return names, result.structured_content

        names, answer = anyio.run(run)
    assert "ask" in names
    assert [s["verdict"] for s in answer["sentences"]] == [
        "supported", "unsupported", "uncited", "unsupported"
    ]  # fmt: skip
    assert answer["all_supported"] is False and answer["citations"][0]["n"] == 1

    async def listed() -> list[str]:
        async with Client(build_server(help_index)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert "ask" not in anyio.run(listed)  # off by default


def test_sentences_and_their_markers() -> None:
    parts = split_sentences("Backups run nightly [2]. They keep 30 days.[1][3]\n- A list item [4]")
    assert parts == [
        ("Backups run nightly.", [2]), ("They keep 30 days.", [1, 3]), ("- A list item", [4])
    ]  # fmt: skip
    assert split_sentences("Done. [1, 2]") == [("Done.", [1, 2])]
    assert content_words("The index is rebuilt by the daemon") == ["index", "rebuilt", "daemon"]
    assert content_words("索引を更新") == ["索", "引", "を", "更", "新"]


def test_a_paraphrase_is_supported_by_meaning_an_invention_is_not() -> None:
    import numpy as np

    from rag_serving.answers.citations import Passage, check_citations
    from rag_serving.embedders import create_embedder

    embedder = create_embedder(RaglineConfig().embedder)

    def embed(texts: list[str]) -> np.ndarray:
        vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    excerpt = (
        "To link to a heading in another note, add a hash (#) after the note name\n"
        "in the link, followed by the heading text, for example [[Note#Heading]].\n"
        "You can also link to blocks with ^."
    )
    passages = {1: Passage(1, excerpt, 10)}
    paraphrase = (
        "You point a link at a section of another note by writing a # and the section "
        "title after the note's name [1]."
    )
    [said] = check_citations(paraphrase, passages, embed).sentences
    assert said.lexical < 0.6 and said.semantic >= 0.72 and said.verdict == "supported"
    assert said.span is not None and 10 <= said.span.line_start <= said.span.line_end <= 12
    invented = "Obsidian syncs notes to the cloud every five minutes [1]."
    [made_up] = check_citations(invented, passages, embed).sentences
    assert made_up.verdict == "unsupported" and made_up.semantic < 0.5
    [lexical] = check_citations(invented, passages, None).sentences  # without vectors
    assert lexical.verdict == "unsupported"
