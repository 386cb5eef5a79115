"""The embedder without PyTorch (issue 29): an ONNX graph built from a model folder's
safetensors weights gives sentence-transformers' own vectors — for the bundled model
on 1,000 real chunks (notes, PDF text, code, Japanese), and for small BERT, XLM-R and
MPNet folders made here with random weights — is cached by the weights' hash, and
says in one line what to install when a model needs PyTorch or a device is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rag_serving.config import SentenceTransformersConfig
from rag_serving.embedders import create_embedder
from rag_serving.embedders.onnx_graph import UnsupportedModel, build_encoder, weights_key
from rag_serving.embedders.sentence_transformers import bundled_model_dir, document_providers
from rag_sources.errors import EmbedderError
from rag_sources.formats.model import ParseOptions
from rag_sources.formats.router import parse_file
from tests.conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[1]
CORPORA = SHARED_DATA / "corpora"


def _windows(text: str, size: int, count: int) -> list[str]:
    """Up to ``count`` consecutive pieces of ``text`` of about ``size`` characters."""
    words = text.split()
    step = max(1, size // 6)
    pieces = [" ".join(words[i : i + step]) for i in range(0, len(words), step)]
    return [p for p in pieces if p.strip()][:count]


def _real_chunks() -> list[str]:
    """1,000 pieces of real text: hub notes, PDF papers, Python code (CoSQA), a
    Japanese novel; short and long (past the model's 256 tokens)."""
    notes = []
    for path in sorted((CORPORA / "obsidian-hub").rglob("*.md"))[:400]:
        notes += _windows(path.read_text(encoding="utf-8", errors="replace"), 700, 2)
    papers = []
    for path in sorted((CORPORA / "pdf" / "papers").glob("*.pdf"))[:6]:
        body = parse_file(path, path.name, "pdf", ParseOptions(ocr="off")).body
        papers += _windows(body, 1200, 50)
    code = []
    with (SHARED_DATA / "eval" / "cosqa" / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for line in corpus:
            code.append(json.loads(line)["text"])
            if len(code) == 250:
                break
    novel = CORPORA / "epub" / "kusamakura-japanese-vertical-writing.epub"
    body = parse_file(novel, novel.name, "epub", ParseOptions()).body
    japanese = [body[i : i + 300] for i in range(0, len(body), 300)][20:170]
    chunks = notes[:354] + papers[:246] + code + japanese[:148] + ["Sync", "a"]
    assert len(chunks) >= 1_000 and all(c.strip() for c in chunks)
    return chunks[:1_000]


@pytest.mark.shared_data
def test_the_bundled_model_gives_sentence_transformers_vectors(tmp_path: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    chunks = _real_chunks()
    embedder = create_embedder(SentenceTransformersConfig(), tmp_path)
    ours = embedder.embed_documents(chunks)
    # float32, as the graph computes (transformers 5 loads the float16 weights as such)
    reference = SentenceTransformer(
        str(bundled_model_dir()), device="cpu", model_kwargs={"dtype": torch.float32}
    ).encode(chunks, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    cosine = np.sum(ours * reference, axis=1)
    assert float(cosine.min()) >= 0.9999, (float(cosine.min()), chunks[int(cosine.argmin())])
    # A query goes through its own one-thread session of the same graph.
    assert float(embedder.embed_query(chunks[7]) @ reference[7]) >= 0.9999
    session = embedder._onnx_session()  # type: ignore[attr-defined]
    assert session.get_providers()[0] == "CPUExecutionProvider"


def _random_folder(folder: Path, architecture: str, pooling: str, dense: bool = False) -> Path:
    """A sentence-transformers folder with a small random model of ``architecture``
    (the bundled model's tokenizer), saved by sentence-transformers itself."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import (
        BertConfig,
        BertModel,
        MPNetConfig,
        MPNetModel,
        XLMRobertaConfig,
        XLMRobertaModel,
    )

    classes = {
        "bert": (BertConfig, BertModel),
        "xlm-roberta": (XLMRobertaConfig, XLMRobertaModel),
        "mpnet": (MPNetConfig, MPNetModel),
    }
    config_class, model_class = classes[architecture]
    torch.manual_seed(7)
    config = config_class(
        vocab_size=30527, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=96, max_position_embeddings=514,
    )  # fmt: skip
    model = model_class(config, add_pooling_layer=False)
    with torch.no_grad():  # weights far from their initial values, LayerNorms included
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.15)
    raw = folder.parent / f"{folder.name}-raw"
    model.save_pretrained(raw)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(bundled_model_dir() / name, raw / name)
    transformer = models.Transformer(str(raw), max_seq_length=256)
    modules = [transformer, models.Pooling(48, pooling_mode=pooling)]
    if dense:
        modules.append(models.Dense(48, 16))
    modules.append(models.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return folder


@pytest.mark.parametrize(
    ("architecture", "pooling"), [("bert", "mean"), ("xlm-roberta", "cls"), ("mpnet", "max")]
)
def test_a_model_folder_of_each_family_gives_its_own_vectors(
    tmp_path: Path, architecture: str, pooling: str
) -> None:
    from sentence_transformers import SentenceTransformer

    folder = _random_folder(tmp_path / architecture, architecture, pooling)
    texts = ["Sync", "How do I link to a heading in another note? " * 30, "東京の天気", "Sync"]
    embedder = create_embedder(SentenceTransformersConfig(model=str(folder)), tmp_path / "data")
    ours = embedder.embed_documents(texts)
    reference = SentenceTransformer(str(folder), device="cpu").encode(
        texts, normalize_embeddings=True, convert_to_numpy=True
    )
    assert ours.shape == (4, 48)
    assert float(np.min(np.sum(ours * reference, axis=1))) >= 0.9999
    graph = embedder._onnx_path()  # type: ignore[attr-defined]
    assert graph.is_file() and graph.parent.name.endswith("-g1")  # built, not exported


def test_the_graph_is_cached_by_the_weights_hash(tmp_path: Path) -> None:
    """The same weights in another folder share a key; a changed weight does not."""
    folder = shutil.copytree(bundled_model_dir(), tmp_path / "copy")
    assert weights_key(folder, tmp_path / "cache") == weights_key(bundled_model_dir())
    memo = json.loads((tmp_path / "cache" / "weights.json").read_text())
    assert set(memo) == {str(folder)}
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 1e-6}))
    assert weights_key(folder, tmp_path / "cache") != weights_key(bundled_model_dir())

    embedder = create_embedder(SentenceTransformersConfig(), tmp_path / "data")
    embedder.embed_documents(["build it once"])
    built = embedder._onnx_path()  # type: ignore[attr-defined]
    assert built.is_file()
    stamp = built.stat().st_mtime_ns
    again = create_embedder(SentenceTransformersConfig(), tmp_path / "data")
    again.embed_documents(["and load it after"])
    assert again._onnx_path() == built and built.stat().st_mtime_ns == stamp  # type: ignore[attr-defined]


def test_a_folder_the_builder_does_not_cover_is_exported_with_pytorch(tmp_path: Path) -> None:
    """A Dense module after pooling: the graph builder says so, and with the torch
    extra installed the folder is exported through PyTorch instead."""
    from sentence_transformers import SentenceTransformer

    folder = _random_folder(tmp_path / "dense", "bert", "mean", dense=True)
    with pytest.raises(UnsupportedModel, match="Dense"):
        build_encoder(folder)
    embedder = create_embedder(SentenceTransformersConfig(model=str(folder)), tmp_path / "data")
    texts = ["Sync", "a longer text about otters holding hands while they sleep"]
    ours = embedder.embed_documents(texts)
    reference = SentenceTransformer(str(folder), device="cpu").encode(
        texts, normalize_embeddings=True, convert_to_numpy=True
    )
    assert ours.shape == (2, 16)
    assert float(np.min(np.sum(ours * reference, axis=1))) >= 0.9999
    assert embedder._onnx_path().parent.name.endswith("-torch")  # type: ignore[attr-defined]


# PyTorch made unimportable, as in an install without the torch extra (the packages
# are present in the test environment; a `None` entry in sys.modules makes their
# import fail exactly as a missing package does).
WITHOUT_TORCH = (
    "import sys\n"
    "for name in ('torch', 'sentence_transformers', 'transformers'):\n"
    "    sys.modules[name] = None\n"
)


def _without_torch(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH + code, *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def test_without_pytorch_the_bundled_model_embeds_and_a_torch_model_is_one_line(
    tmp_path: Path,
) -> None:
    folder = _random_folder(tmp_path / "dense", "bert", "mean", dense=True)
    done = _without_torch(
        "from pathlib import Path\n"
        "from rag_serving.config import SentenceTransformersConfig\n"
        "from rag_serving.embedders import create_embedder\n"
        "from rag_sources.errors import EmbedderError\n"
        "data = Path(sys.argv[1])\n"
        "vector = create_embedder(SentenceTransformersConfig(), data).embed_query('otters')\n"
        "print(vector.shape[0], 'torch' in sys.modules and sys.modules['torch'] is not None)\n"
        "for config in (SentenceTransformersConfig(model=sys.argv[2]),\n"
        "               SentenceTransformersConfig(document_backend='torch')):\n"
        "    try:\n"
        "        create_embedder(config, data).embed_documents(['x'])\n"
        "    except EmbedderError as exc:\n"
        "        print(exc)\n",
        str(tmp_path / "data"), str(folder),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "384 False"
    assert lines[1].startswith(
        f"embedding with PyTorch (the model {str(folder)!r}: its modules.json lists Dense) "
        "needs the torch extra: pip install 'ragline[torch]'"
    ), lines[1]
    assert lines[2].startswith(
        'embedding with PyTorch ([embedder] document_backend or query_backend = "torch") '
        "needs the torch extra"
    ), lines[2]


def test_the_device_is_chosen_and_a_missing_provider_is_one_line() -> None:
    import onnxruntime as ort

    available = ort.get_available_providers()
    assert document_providers("cpu") == ["CPUExecutionProvider"]
    auto = document_providers("auto")
    assert auto[-1] == "CPUExecutionProvider" and auto[0] in available
    if "CUDAExecutionProvider" not in available:  # this machine: no onnxruntime-gpu
        assert auto == ["CPUExecutionProvider"]
        with pytest.raises(EmbedderError) as missing:
            document_providers("cuda")
        assert str(missing.value) == (
            "[embedder] device = 'cuda', but ONNX Runtime has no CUDAExecutionProvider here "
            '(install onnxruntime-gpu in ragline\'s environment, or set device = "auto")'
        )
    # ONNX Runtime's lists elsewhere: CUDA (onnxruntime-gpu) is taken by auto; CoreML
    # (macOS's wheel) only when asked for, as it is not measured (docs/decisions.md).
    cpu, cuda, coreml = "CPUExecutionProvider", "CUDAExecutionProvider", "CoreMLExecutionProvider"
    assert document_providers("auto", [cuda, cpu]) == [cuda, cpu]
    assert document_providers("auto", [coreml, cpu]) == [cpu]
    assert document_providers("mps", [coreml, cpu]) == [coreml, cpu]
    assert document_providers("auto", [cuda, coreml, cpu]) == [cuda, cpu]
    embedder = create_embedder(SentenceTransformersConfig(device="cpu"))
    assert embedder.device == "cpu (ONNX Runtime)"
