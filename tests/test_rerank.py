"""The reranking stage on the real sample index (LanceDB, Tantivy, the bundled MiniLM).

The cross-encoder is real: a sentence-transformers ``CrossEncoder`` built here from
the bundled MiniLM weights with a seeded, untrained relevance head. Its ranking
means nothing, but it is a real model folder loaded the way a user's would be, so
the tests can check that hits come back in that model's own order. No rerank server
and no Ollama can run here: the ``http`` provider is tested against a STAND-IN
``/v1/rerank`` server defined below, and the ``ollama`` provider against the Ollama
STAND-IN of tests/ollama_standin.py; both score by a known rule.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from rag_serving.config import RaglineConfig, RerankConfig, parse_config_file
from rag_serving.evaluation.self_eval import HISTORY_FILE
from rag_serving.mcp import build_server
from rag_serving.search import SearchEngine
from rag_serving.search.engine import SearchResult, rerank_text
from rag_serving.search.rerank import (
    RerankerError,
    available_providers,
    create_reranker,
    yes_probability,
)
from rag_sources.errors import ConfigError
from rag_sources.where import sql_in
from ragline.cli import cli

try:  # tests/ as a package or as a plain folder on sys.path
    from tests.ollama_standin import RERANK_MODEL, OllamaStandIn, standin_yes_probability
except ImportError:  # pragma: no cover - depends on how pytest was started
    from ollama_standin import RERANK_MODEL, OllamaStandIn, standin_yes_probability

QUERY = "how do I roll back a deployment"
TOP_N = 4
_WORD_RE = re.compile(r"\w+")


# ---- helpers ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real cross-encoder folder: the bundled MiniLM with a seeded one-label head."""
    import torch
    from sentence_transformers import CrossEncoder

    from rag_serving.embedders.sentence_transformers import bundled_model_dir

    model = CrossEncoder(str(bundled_model_dir()), num_labels=1, device="cpu")
    generator = torch.Generator().manual_seed(14)
    head = model.model.classifier
    with torch.no_grad():
        head.weight.copy_(torch.randn(head.weight.shape, generator=generator))
        head.bias.zero_()
    folder = tmp_path_factory.mktemp("cross-encoder") / "seeded-minilm-ce"
    model.save(str(folder))
    return folder


def with_rerank(index: RaglineConfig, root: Path, **rerank: object) -> RaglineConfig:
    """The sample index's config (same data, read only) with a [search.rerank] table."""
    import tomli_w

    root.mkdir(parents=True, exist_ok=True)
    text = Path(index.config_path or "").read_text()
    table = tomli_w.dumps({"search": {"rerank": rerank}})
    (root / "ragline.toml").write_text(text + "\n" + table)
    return parse_config_file(root / "ragline.toml")


def texts_of(engine: SearchEngine, ids: list[str]) -> dict[str, str]:
    """What the reranker reads of each chunk, read straight from LanceDB."""
    assert engine.generation is not None
    rows = engine.store.read(
        engine.generation.table,
        where=sql_in("chunk_id", ids),
        columns=["chunk_id", "title", "heading", "text"],
    ).to_pylist()
    return {row["chunk_id"]: rerank_text(row) for row in rows}


def ids(result: SearchResult) -> list[str]:
    return [hit.chunk_id for hit in result.hits]


def check_reordered(plain: SearchResult, reranked: SearchResult, scores: dict[str, float]) -> None:
    """The top TOP_N of ``plain`` in descending ``scores`` (ties: fused order), the rest
    unchanged, with the rerank explain and timing."""
    head = ids(plain)[:TOP_N]
    expected = sorted(head, key=lambda c: (-scores[c], head.index(c)))
    assert ids(reranked)[:TOP_N] == expected
    assert ids(reranked)[TOP_N:] == ids(plain)[TOP_N:]
    assert len(ids(plain)) > TOP_N  # there are hits past top_n to keep in place
    assert "rerank" in reranked.timings and "rerank" not in plain.timings
    before = {c: rank for rank, c in enumerate(ids(plain), 1)}
    for hit in reranked.hits[:TOP_N]:
        entry = hit.explain["rerank"]
        assert entry["score"] == pytest.approx(scores[hit.chunk_id], abs=1e-5)
        assert hit.score == pytest.approx(scores[hit.chunk_id], abs=1e-5)
        assert entry["rank_before"] == before[hit.chunk_id]
        assert {"bm25", "vector"} <= set(hit.explain)
    for hit, old in zip(reranked.hits[TOP_N:], plain.hits[TOP_N:], strict=True):
        assert "rerank" not in hit.explain and hit.score == pytest.approx(old.score, rel=1e-5)


def shortness(query: str, text: str) -> float:
    """The stand-in rerank server's rule: shorter documents first (a rule the fused
    order does not follow, so reranking visibly reorders)."""
    return 1000.0 / (1000 + len(text))


# ---- the local cross-encoder ------------------------------------------------------------


@pytest.fixture(scope="module")
def ce_config(
    sample_index: RaglineConfig, cross_encoder_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> RaglineConfig:
    root = tmp_path_factory.mktemp("ce-config")
    return with_rerank(
        sample_index, root, provider="cross-encoder", model=str(cross_encoder_dir), top_n=TOP_N
    )


@pytest.fixture(scope="module")
def ce_engine(ce_config: RaglineConfig) -> SearchEngine:
    return SearchEngine(ce_config)


@pytest.fixture(scope="module")
def ce_expected(ce_engine: SearchEngine, cross_encoder_dir: Path) -> dict[str, float]:
    """The model's own scores for the plain top TOP_N, computed outside the engine."""
    from sentence_transformers import CrossEncoder

    plain = ce_engine.search(QUERY, k=10, rerank=False)
    texts = texts_of(ce_engine, ids(plain)[:TOP_N])
    model = CrossEncoder(str(cross_encoder_dir), device="cpu")
    pairs = [(QUERY, text) for text in texts.values()]
    return {c: float(s) for c, s in zip(texts, model.predict(pairs), strict=True)}


def test_cross_encoder_puts_the_top_n_in_its_own_order(
    ce_engine: SearchEngine, ce_expected: dict[str, float]
) -> None:
    plain = ce_engine.search(QUERY, k=10, rerank=False)
    reranked = ce_engine.search(QUERY, k=10, rerank=True)
    check_reordered(plain, reranked, ce_expected)
    assert ids(reranked)[:TOP_N] != ids(plain)[:TOP_N]  # the seeded head does reorder
    # Loaded once per engine: the second search reuses the model.
    model = ce_engine.reranker._model  # type: ignore[attr-defined]
    again = ce_engine.search(QUERY, k=10, rerank=True)
    assert ce_engine.reranker._model is model  # type: ignore[attr-defined]
    assert ids(again) == ids(reranked)


def test_rerank_defaults_to_the_configs_enabled(
    sample_index: RaglineConfig, cross_encoder_dir: Path, tmp_path: Path
) -> None:
    on = with_rerank(sample_index, tmp_path, enabled=True, model=str(cross_encoder_dir))
    engine = SearchEngine(on)
    assert "rerank" in engine.search(QUERY, k=3).timings
    assert "rerank" not in engine.search(QUERY, k=3, rerank=False).timings
    assert "rerank" not in SearchEngine(sample_index).search(QUERY, k=3).timings


def test_cli_rerank_explain_json(
    ce_config: RaglineConfig, ce_engine: SearchEngine, ce_expected: dict[str, float]
) -> None:
    base = ["--config", str(ce_config.config_path), "search", QUERY, "--k", "6"]
    result = CliRunner().invoke(cli, [*base, "--rerank", "--explain", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert "rerank" in data["timings_ms"] and data["timings_ms"]["rerank"] > 0
    plain = ce_engine.search(QUERY, k=6, rerank=False)
    head = ids(plain)[:TOP_N]
    expected = sorted(head, key=lambda c: (-ce_expected[c], head.index(c)))
    assert [h["chunk_id"] for h in data["hits"]] == expected + ids(plain)[TOP_N:]
    for hit in data["hits"][:TOP_N]:
        assert hit["explain"]["rerank"]["score"] == pytest.approx(ce_expected[hit["chunk_id"]])
        assert hit["explain"]["rerank"]["rank_before"] == head.index(hit["chunk_id"]) + 1
    plain_cli = CliRunner().invoke(cli, [*base, "--no-rerank", "--explain", "--json"])
    assert "rerank" not in json.loads(plain_cli.output)["timings_ms"]
    human = CliRunner().invoke(cli, [*base, "--rerank", "--explain"])
    assert human.exit_code == 0, human.output
    flat = " ".join(human.output.split())  # rich wraps long lines
    assert "rerank: score" in flat and "before)" in flat
    assert re.search(r"time \(ms\): .*rerank \d+\.\d", flat)


def test_mcp_search_takes_a_rerank_argument(
    ce_config: RaglineConfig, ce_engine: SearchEngine
) -> None:
    server = build_server(ce_config)

    async def run() -> tuple[Any, ...]:
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            on = await client.call_tool("search", {"query": QUERY, "k": 6, "rerank": True})
            off = await client.call_tool("search", {"query": QUERY, "k": 6, "rerank": False})
            return tools["search"], on.structured_content, off.structured_content

    tool, on, off = anyio.run(run)
    assert tool.input_schema["properties"]["rerank"]["anyOf"][0]["type"] == "boolean"
    assert [h["chunk_id"] for h in on["hits"]] == ids(ce_engine.search(QUERY, k=6, rerank=True))
    assert [h["chunk_id"] for h in off["hits"]] == ids(ce_engine.search(QUERY, k=6, rerank=False))
    assert on["hits"][0]["score"] == pytest.approx(
        ce_engine.search(QUERY, k=1, rerank=True).hits[0].score, abs=1e-5
    )


# ---- bad configuration ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"model": "/nowhere/ce-model"}, "search.rerank.model '/nowhere/ce-model' is not a folder"),
        ({}, "search.rerank.model is not set"),
        ({"provider": "ollama"}, "search.rerank.model is not set; name the Ollama reranking"),
    ],
)
def test_bad_reranker_settings_are_one_line_errors(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        create_reranker(RerankConfig(**settings))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_folders_that_are_not_cross_encoders_are_refused(tmp_path: Path) -> None:
    from rag_serving.embedders.sentence_transformers import bundled_model_dir

    with pytest.raises(ConfigError, match=r"has no config\.json, so it is not a model folder"):
        create_reranker(RerankConfig(model=str(tmp_path)))
    with pytest.raises(ConfigError, match="is a BertModel, not a cross-encoder"):
        create_reranker(RerankConfig(model=str(bundled_model_dir())))


def test_cli_missing_model_path_is_one_line(sample_index: RaglineConfig, tmp_path: Path) -> None:
    config = with_rerank(sample_index, tmp_path, model=str(tmp_path / "gone"))
    result = CliRunner().invoke(
        cli, ["--config", str(config.config_path), "search", QUERY, "--rerank"]
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "is not a folder" in lines[0] and "gone" in lines[0]
    # Without --rerank the same config searches.
    ok = CliRunner().invoke(cli, ["--config", str(config.config_path), "search", QUERY])
    assert ok.exit_code == 0, ok.output


def test_unknown_provider_is_a_config_error(sample_index: RaglineConfig, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="provider"):
        with_rerank(sample_index, tmp_path, provider="cohere-cloud")
    assert available_providers() == ["cross-encoder", "http", "ollama"]


# ---- the http provider, against a stand-in rerank server ----------------------------------


class RerankStandIn:
    """A STAND-IN for a ``/v1/rerank`` server (llama-server --reranking, vLLM, Infinity):
    none can run here. Scores each document by :func:`shortness`, and answers the
    results best first, as those servers do."""

    def __init__(self, delay_s: float = 0.0, drop_last: bool = False) -> None:
        self.delay_s = delay_s
        self.drop_last = drop_last
        self.bodies: list[dict[str, Any]] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.bodies.append(body)
                if self.path != "/v1/rerank":
                    return self._send(404, {"error": "not found"})
                time.sleep(standin.delay_s)
                results = [
                    {"index": i, "relevance_score": shortness(body["query"], doc)}
                    for i, doc in enumerate(body["documents"])
                ]
                results.sort(key=lambda r: -r["relevance_score"])
                if standin.drop_last:
                    results = results[:-1]
                self._send(200, {"model": body.get("model"), "results": results})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1/rerank"

    def __enter__(self) -> RerankStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def closed_url() -> Iterator[str]:
    """A URL on 127.0.0.1 whose port is bound but not listening: connecting is refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1/rerank"
    finally:
        sock.close()


def test_http_reranker_orders_by_the_servers_scores(
    sample_index: RaglineConfig, tmp_path: Path
) -> None:
    with RerankStandIn() as server:
        config = with_rerank(
            sample_index, tmp_path, provider="http", url=server.url, model="bge-reranker-v2-m3",
            top_n=TOP_N,
        )  # fmt: skip
        engine = SearchEngine(config)
        plain = engine.search(QUERY, k=10, rerank=False)
        reranked = engine.search(QUERY, k=10, rerank=True)
    texts = texts_of(engine, ids(plain)[:TOP_N])
    check_reordered(plain, reranked, {c: shortness(QUERY, t) for c, t in texts.items()})
    assert ids(reranked)[:TOP_N] != ids(plain)[:TOP_N]
    (body,) = server.bodies
    assert body == {
        "model": "bge-reranker-v2-m3",
        "query": QUERY,
        "documents": [texts[c] for c in ids(plain)[:TOP_N]],
        "top_n": TOP_N,
    }


def test_http_reranker_errors_are_one_line(closed_url: str) -> None:
    refused = create_reranker(RerankConfig(provider="http", url=closed_url))
    with pytest.raises(RerankerError) as caught:
        refused.score("q", ["a"])
    message = str(caught.value)
    assert message.startswith(f"cannot reach the reranker at {closed_url}")
    assert "llama-server --reranking" in message and "--no-rerank" in message
    assert "\n" not in message
    with RerankStandIn(delay_s=1.5) as server:
        slow = create_reranker(RerankConfig(provider="http", url=server.url, timeout_s=0.3))
        started = time.monotonic()
        with pytest.raises(RerankerError, match=r"did not answer within 0\.3 s; raise search"):
            slow.score("q", ["a"])
        assert time.monotonic() - started < 1.4
    with RerankStandIn(drop_last=True) as server:
        partial = create_reranker(RerankConfig(provider="http", url=server.url))
        with pytest.raises(RerankerError, match="returned no score for 1 of 2 documents"):
            partial.score("q", ["a", "b"])


def test_cli_unreachable_reranker_exits_with_one_line(
    sample_index: RaglineConfig, tmp_path: Path, closed_url: str
) -> None:
    config = with_rerank(sample_index, tmp_path, provider="http", url=closed_url)
    result = CliRunner().invoke(
        cli, ["--config", str(config.config_path), "search", QUERY, "--rerank"]
    )
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and closed_url in lines[0]


# ---- the ollama provider, against the Ollama stand-in ------------------------------------


def test_ollama_reranker_scores_by_yes_probability(
    sample_index: RaglineConfig, tmp_path: Path
) -> None:
    with OllamaStandIn() as server:
        config = with_rerank(
            sample_index, tmp_path, provider="ollama", host=server.host, model=RERANK_MODEL,
            top_n=TOP_N,
        )  # fmt: skip
        engine = SearchEngine(config)
        plain = engine.search(QUERY, k=10, rerank=False)
        reranked = engine.search(QUERY, k=10, rerank=True)
        requests = server.generate_requests
    texts = texts_of(engine, ids(plain)[:TOP_N])
    expected = {c: standin_yes_probability(QUERY, t) for c, t in texts.items()}
    check_reordered(plain, reranked, expected)
    assert len(requests) == TOP_N
    for request in requests:
        body = request.body
        assert body["model"] == RERANK_MODEL and body["raw"] is True
        assert body["stream"] is False and body["logprobs"] is True
        assert body["top_logprobs"] == 5 and body["options"]["num_predict"] == 1
        assert f"<Query>: {QUERY}\n<Document>: " in body["prompt"]
    assert sorted(r.body["prompt"].split("<Document>: ")[1] for r in requests) == sorted(
        f"{t}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" for t in texts.values()
    )


def test_ollama_reranker_errors(closed_url: str) -> None:
    with OllamaStandIn(logprobs=False) as server:
        old = create_reranker(RerankConfig(provider="ollama", host=server.host, model=RERANK_MODEL))
        with pytest.raises(RerankerError, match=r"needs Ollama 0\.12\.11 or later"):
            old.score("q", ["a"])
    with OllamaStandIn() as server:
        unknown = create_reranker(RerankConfig(provider="ollama", host=server.host, model="nope"))
        with pytest.raises(
            RerankerError,
            match=r'HTTP 404: model "nope" not found, try pulling it first \(search.rerank',
        ):
            unknown.score("q", ["a"])
    host = closed_url.removesuffix("/v1/rerank")
    down = create_reranker(RerankConfig(provider="ollama", host=host, model=RERANK_MODEL))
    with pytest.raises(
        RerankerError, match=r"cannot reach the reranker at .*Connection refused.*`ollama serve`"
    ):
        down.score("q", ["a"])


def test_yes_probability_reads_ollamas_logprobs() -> None:
    import math

    def entry(token: str, p: float) -> dict[str, Any]:
        return {"token": token, "logprob": math.log(p)}

    top = [entry("yes", 0.6), entry("Yes", 0.1), entry(" no", 0.2), entry("maybe", 0.1)]
    assert yes_probability([{**top[0], "top_logprobs": top}]) == pytest.approx(0.7 / 0.9)
    assert yes_probability([{**entry("no", 0.9), "top_logprobs": []}]) == 0.0
    assert yes_probability([{**entry("maybe", 0.9), "top_logprobs": [entry("maybe", 0.9)]}]) is None
    assert yes_probability([]) is None and yes_probability(None) is None


# ---- the model folder relative to the config, and `ragline eval --rerank` ----------------


def test_relative_model_folder_and_eval_rerank_flag(
    sample_index: RaglineConfig,
    sample_vault: Path,
    cross_encoder_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import shutil

    import tomli_w

    # A copy of the index (eval --self writes beside it), its config naming the model
    # folder relative to the config file, read from another working directory.
    shutil.copytree(sample_vault, tmp_path / "vault")
    shutil.copytree(sample_index.data_dir, tmp_path / "data")
    shutil.copytree(cross_encoder_dir, tmp_path / "models" / "ce")
    text = Path(sample_index.config_path or "").read_text()
    text = text.replace(str(sample_index.data_dir), str(tmp_path / "data"))
    text = text.replace(str(sample_vault), str(tmp_path / "vault"))
    table = {"search": {"rerank": {"model": "models/ce", "top_n": TOP_N}}}
    (tmp_path / "ragline.toml").write_text(text + "\n" + tomli_w.dumps(table))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = parse_config_file(tmp_path / "ragline.toml")
    assert config.search.rerank.model == str(tmp_path / "models" / "ce")
    assert "rerank" in SearchEngine(config).search(QUERY, k=6, rerank=True).timings

    def evaluate(*flags: str) -> dict[str, Any]:
        args = ["--config", str(tmp_path / "ragline.toml"), "eval", "--self", "--json"]
        result = CliRunner().invoke(cli, [*args, "--modes", "hybrid", "--limit", "3", *flags])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    evaluate()  # reranking off, as configured
    reranked = evaluate("--rerank")
    assert "search.rerank.enabled: False → True" in reranked["previous"]["settings_changed"]
    history = (tmp_path / "data" / "eval" / HISTORY_FILE).read_text().splitlines()
    assert json.loads(history[-1])["settings"]["search"]["rerank"]["enabled"] is True
    plain = evaluate("--no-rerank")
    assert "search.rerank.enabled: True → False" in plain["previous"]["settings_changed"]


def test_reranker_answers_and_model_configs_are_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer larger than the cap (decompressed) and a model folder's oversized
    config.json are one-line refusals, read no further than the cap."""
    from rag_serving.search import rerank

    monkeypatch.setattr(rerank, "MAX_ANSWER_BYTES", 10)
    with RerankStandIn() as server:
        bounded = create_reranker(RerankConfig(provider="http", url=server.url))
        with pytest.raises(RerankerError, match=r"answered more than 10 bytes") as caught:
            bounded.score("q", ["a", "b"])
    assert "\n" not in str(caught.value)
    folder = tmp_path / "huge"
    folder.mkdir()
    (folder / "config.json").write_text('{"architectures": []' + " " * (2 * 1024 * 1024) + "}")
    with pytest.raises(ConfigError, match=r"is larger than 1,048,576 bytes"):
        create_reranker(RerankConfig(model=str(folder)))
