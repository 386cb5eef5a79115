"""A multilingual embedder through Ollama (issue 14, item 3): bge-m3 (1024 dims) indexes
and searches Japanese and Arabic notes end to end, the switch from the bundled MiniLM to
it goes through the no-downtime generation swap, and e5-style "query: " / "passage: "
prefixes reach the server.

No Ollama server can be installed on this machine: the real ``ollama`` client talks over
loopback HTTP to the STAND-IN server of ``tests/ollama_standin.py``, whose vectors are a
hashed bag of ``\\w+`` runs (for Japanese without spaces: one run per sentence). The
tests check ragline's side (config, indexing, the manifest, search, fusion weights), not
the quality of the real bge-m3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w
from click.testing import CliRunner

from rag_serving.config import parse_config_file
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.search import SearchEngine
from ragline.cli import cli
from tests.ollama_standin import DEFAULT_MODELS, OllamaStandIn

MODELS = {**DEFAULT_MODELS, "bge-m3": 1024, "multilingual-e5-small": 384}

JAPANESE = {
    "猫.md": "# 吾輩は猫\n\n吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。\n",
    "山路.md": "# 山路\n\n山路を登りながら考えた。智に働けば角が立つ。情に棹させば流される。\n",
    "汽車.md": "# 汽車\n\n汽車の窓から田圃が見える。駅の弁当は冷たかった。東京はまだ遠い。\n",
}
ARABIC = {
    "طعام.md": "# الطعام\n\nالخضروات الطازجة تحمي الجسم من الأمراض. الشاي الأخضر مفيد للصحة.\n",
    "رياضة.md": "# الرياضة\n\nالمشي كل يوم يقوي القلب. السباحة رياضة كاملة للجسم.\n",
    "نوم.md": "# النوم\n\nالنوم الجيد يساعد الدماغ على التذكر. الضوء الأزرق يؤخر النوم.\n",
}


def write_vault(root: Path) -> list[dict[str, object]]:
    """Two sources (so that a switch can be half done): Japanese and Arabic notes."""
    sources: list[dict[str, object]] = []
    for name, notes in (("ja", JAPANESE), ("ar", ARABIC)):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for filename, text in notes.items():
            (folder / filename).write_text(text, encoding="utf-8")
        sources.append({"name": name, "kind": "markdown", "path": str(folder)})
    return sources


def write_config(
    directory: Path, sources: list[dict[str, object]], embedder: dict[str, object] | None
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    payload: dict[str, object] = {"data_dir": str(directory / "data"), "sources": sources}
    if embedder is not None:
        payload["embedder"] = embedder
    path = directory / "ragline.toml"
    path.write_bytes(tomli_w.dumps(payload).encode())
    return path


def index_json(config_path: Path, *args: str) -> list[dict]:
    result = CliRunner().invoke(cli, ["--config", str(config_path), "index", "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def bge_m3(server: OllamaStandIn, **extra: object) -> dict[str, object]:
    return {
        "provider": "ollama",
        "host": server.host,
        "model": "bge-m3",
        "max_tokens": 8192,
        "multilingual": True,
        **extra,
    }


@pytest.fixture
def standin() -> Iterator[OllamaStandIn]:
    with OllamaStandIn(models=MODELS) as server:
        yield server


def top_paths(engine: SearchEngine, query: str, mode: str) -> list[str]:
    return [hit.path for hit in engine.search(query, k=3, mode=mode).hits]  # type: ignore[arg-type]


def test_bge_m3_indexes_and_searches_japanese_and_arabic(
    tmp_path: Path, standin: OllamaStandIn
) -> None:
    config_path = write_config(tmp_path, write_vault(tmp_path / "vault"), bge_m3(standin))
    index_json(config_path)
    config = parse_config_file(config_path)
    active = read_manifest(IndexLayout(config.data_dir).manifest_path).active
    assert active.fingerprint.as_dict() | {"chunker_version": ""} == {
        "provider": "ollama", "model": "bge-m3", "dimension": 1024, "chunker_version": "",
    }  # fmt: skip
    embedded = [text for r in standin.embed_requests for text in r.inputs]
    assert all(r.body["model"] == "bge-m3" for r in standin.embed_requests)
    assert any("名前はまだ無い" in t for t in embedded)  # UTF-8 survived the JSON round trip
    assert any("الشاي الأخضر مفيد للصحة" in t for t in embedded)

    engine = SearchEngine(config)
    vectors = engine.store.read(active.table, columns=["vector"]).column("vector").to_pylist()
    assert len(vectors) == 6 and {len(v) for v in vectors} == {1024}
    for query, note in (
        ("名前はまだ無い", "猫.md"),
        ("情に棹させば流される", "山路.md"),
        ("السباحة رياضة", "رياضة.md"),
        ("الضوء الأزرق", "نوم.md"),
    ):
        for mode in ("vector", "bm25", "hybrid"):
            assert top_paths(engine, query, mode)[0] == note, (query, mode)
    assert standin.embed_requests[-1].inputs == ["الضوء الأزرق"]  # the query went to bge-m3


def test_a_multilingual_embedder_keeps_the_vector_list_leading(
    tmp_path: Path, standin: OllamaStandIn
) -> None:
    """For a Japanese query an English-only embedder's weights are swapped so keywords
    lead; `multilingual = true` (bge-m3) keeps the configured weights (vector 1.0,
    bm25 0.3), seen in the fused hit's explain (contribution = weight × normalised
    score)."""
    sources = write_vault(tmp_path / "vault")
    contributions = {}
    for flag in (True, False):
        directory = tmp_path / str(flag)
        config_path = write_config(directory, sources, bge_m3(standin, multilingual=flag))
        index_json(config_path)
        config = parse_config_file(config_path)
        # Without query-vector feedback, whose re-scored vector list depends on the
        # first fusion (and so on the weights): the normalised scores stay equal.
        search = config.search.model_copy(
            update={"feedback": config.search.feedback.model_copy(update={"enabled": False})}
        )
        engine = SearchEngine(config.model_copy(update={"search": search}))
        [hit] = engine.search("名前はまだ無い", k=1, mode="hybrid").hits
        assert hit.path == "猫.md"
        contributions[flag] = {name: c["contribution"] for name, c in hit.explain.items()}
    # Same index, same normalised scores: only the weights differ, (1.0/0.3) each way.
    ratio = {flag: c["vector"] / c["bm25"] for flag, c in contributions.items()}
    assert ratio[True] / ratio[False] == pytest.approx((1.0 / 0.3) ** 2, rel=1e-6)


def test_switching_from_minilm_to_bge_m3_swaps_generations_without_downtime(
    tmp_path: Path, standin: OllamaStandIn
) -> None:
    sources = write_vault(tmp_path / "vault")
    config_path = write_config(tmp_path, sources, None)  # the bundled MiniLM
    index_json(config_path)
    layout = IndexLayout(tmp_path / "data")
    old = read_manifest(layout.manifest_path).active
    assert old.fingerprint.provider == "sentence-transformers"
    assert old.fingerprint.dimension == 384

    write_config(tmp_path, sources, bge_m3(standin))
    config = parse_config_file(config_path)
    index_json(config_path, "ja")  # half of the switch: one source re-embedded
    manifest = read_manifest(layout.manifest_path)
    assert manifest.active == old and manifest.building is not None
    assert manifest.building.fingerprint.model == "bge-m3"
    assert manifest.building.fingerprint.dimension == 1024
    engine = SearchEngine(config)
    for mode in ("hybrid", "vector", "bm25"):  # answers from the live MiniLM vectors
        result = engine.search("الضوء الأزرق", k=3, mode=mode)  # type: ignore[arg-type]
        assert result.hits, mode
        assert result.notice is not None and "ollama:bge-m3" in result.notice
        # MiniLM cannot read Arabic (its vector list is noise); keywords still find it.
        assert mode == "vector" or result.hits[0].path == "نوم.md", mode
    assert engine.generation == old

    index_json(config_path, "ar")  # the last source: the new generation goes live
    manifest = read_manifest(layout.manifest_path)
    assert manifest.building is None and manifest.active.fingerprint.model == "bge-m3"
    asked = len(standin.embed_requests)
    result = engine.search("智に働けば角が立つ", k=3, mode="vector")  # same engine, no restart
    assert engine.generation == manifest.active and result.notice is None
    assert result.hits[0].path == "山路.md"
    assert standin.embed_requests[asked:][-1].inputs == ["智に働けば角が立つ"]
    vectors = engine.store.read(manifest.active.table, columns=["vector"]).column("vector")
    assert {len(v) for v in vectors.to_pylist()} == {1024}


def e5_small(standin: OllamaStandIn) -> dict[str, object]:
    """multilingual-e5-small through the stand-in, with the prefixes e5 was trained on."""
    return {
        "provider": "ollama",
        "host": standin.host,
        "model": "multilingual-e5-small",
        "multilingual": True,
        "query_prefix": "query: ",
        "document_prefix": "passage: ",
    }


def test_e5_prefixes_reach_the_server(tmp_path: Path, standin: OllamaStandIn) -> None:
    embedder = e5_small(standin)
    config_path = write_config(tmp_path, write_vault(tmp_path / "vault"), embedder)
    index_json(config_path)
    embedded = [text for r in standin.embed_requests for text in r.inputs]
    assert embedded and all(text.startswith("passage: ") for text in embedded)
    assert any("吾輩は猫である" in t for t in embedded)
    engine = SearchEngine(parse_config_file(config_path))
    asked = len(standin.embed_requests)
    assert top_paths(engine, "どこで生れたかとんと見当がつかぬ", "vector")[0] == "猫.md"
    [query] = standin.embed_requests[asked:]
    assert query.inputs == ["query: どこで生れたかとんと見当がつかぬ"]


def test_new_prefixes_are_a_new_generation_and_queries_keep_the_live_ones(
    tmp_path: Path, standin: OllamaStandIn
) -> None:
    embedder = e5_small(standin)
    sources = write_vault(tmp_path / "vault")
    config_path = write_config(tmp_path, sources, embedder)
    index_json(config_path)
    layout = IndexLayout(tmp_path / "data")
    old = read_manifest(layout.manifest_path).active
    assert (old.fingerprint.document_prefix, old.fingerprint.query_prefix) == (
        "passage: ",
        "query: ",
    )

    nomic = {**embedder, "query_prefix": "search_query: ", "document_prefix": "search_document: "}
    write_config(tmp_path, sources, nomic)
    index_json(config_path, "ja")  # half of the switch: the old vectors stay live
    manifest = read_manifest(layout.manifest_path)
    assert manifest.active == old and manifest.building is not None
    assert manifest.building.fingerprint.document_prefix == "search_document: "
    assert manifest.building.key != old.key
    engine = SearchEngine(parse_config_file(config_path))
    asked = len(standin.embed_requests)
    engine.search("見当がつかぬ", k=3, mode="vector")
    assert standin.embed_requests[asked:][-1].inputs == ["query: 見当がつかぬ"]

    index_json(config_path, "ar")
    assert read_manifest(layout.manifest_path).active.fingerprint.query_prefix == "search_query: "
    asked = len(standin.embed_requests)
    engine.search("見当がつかぬ", k=3, mode="vector")
    assert standin.embed_requests[asked:][-1].inputs == ["search_query: 見当がつかぬ"]
