"""Embedding throughput on a GPU against the CPU (issue 29): the bundled model on
10,000 real chunks, PyTorch on CUDA and on the CPU and the torch-free ONNX graph on
the CPU (and on CUDA where ONNX Runtime has it), in one run on one machine.

A device machine has PyTorch, sentence-transformers, ONNX Runtime (CPU), onnx,
safetensors and tokenizers, but not ragline's other dependencies, and nothing can be
fetched there. So the work is in three steps:

1. ``prepare`` (here): a seeded sample of chunk texts from a ragline index's
   ``staged_chunks`` (``make bench`` builds one of the Hub vault) and the bundled
   model's files, copied into a folder inside the checkout that git ignores
   (``.device/``, ~55 MB: it travels with the working tree, in ``carry``).
2. ``measure`` (on the device machine): loads only that folder and this file's own
   imports (the graph builder is read from ``rag_serving/embedders/onnx_graph.py`` by
   path), writes ``gpu_embedding.json`` to ``--out``.
3. ``report`` (here): puts that result in docs/benchmarks.md.

    python -m benchmarks.gpu_embedding prepare --index /tmp/ragline-bench/hub
    # device: python3 benchmarks/gpu_embedding.py measure --data .device --out $OUT
    python -m benchmarks.gpu_embedding report --result FILES_AT/gpu_embedding.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHUNKS = 10_000
SEED = 7
MAX_TOKENS = 256  # all-MiniLM-L6-v2's input, as sentence-transformers truncates


def prepare(index: Path, data: Path, count: int) -> None:
    """Chunk texts of ``index`` and the bundled model's files into ``data``."""
    import lancedb

    table = lancedb.connect(str(index / "lancedb")).open_table("staged_chunks")
    texts = table.to_arrow().column("embed_text").to_pylist()
    random.Random(SEED).shuffle(texts)
    data.mkdir(parents=True, exist_ok=True)
    (data / "texts.json").write_text(json.dumps(texts[:count], ensure_ascii=False))
    model = REPO / "rag_serving" / "embedders" / "bundled_model"
    shutil.rmtree(data / "model", ignore_errors=True)
    shutil.copytree(model, data / "model")
    shutil.copy(REPO / "rag_serving" / "embedders" / "onnx_graph.py", data / "onnx_graph.py")
    print(f"{min(count, len(texts))} texts and the model in {data}")


def _graph_module(data: Path) -> Any:
    spec = importlib.util.spec_from_file_location("onnx_graph", data / "onnx_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["onnx_graph"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _onnx(data: Path, texts: list[str], provider: str, batch: int) -> tuple[Any, float]:
    """Vectors and seconds of the torch-free graph on one ONNX Runtime provider."""
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    graph = _graph_module(data).build_encoder(data / "model")
    session = ort.InferenceSession(graph.SerializeToString(), providers=[provider])
    with_types = any(i.name == "token_type_ids" for i in session.get_inputs())
    warm = {name: np.ones((2, 8), dtype=np.int64) for name in ("input_ids", "attention_mask")}
    if with_types:
        warm["token_type_ids"] = np.zeros((2, 8), dtype=np.int64)
    session.run(None, warm)  # the first call's allocations, outside the timing
    tokenizer = Tokenizer.from_file(str(data / "model" / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    started = time.perf_counter()
    ids = []
    for e in tokenizer.encode_batch([t.lower() for t in texts]):
        got = e.ids if len(e.ids) <= MAX_TOKENS else e.ids[: MAX_TOKENS - 1] + e.ids[-1:]
        ids.append(np.asarray(got, dtype=np.int64))
    order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
    out = np.empty((len(texts), 384), dtype=np.float32)
    for start in range(0, len(order), batch):
        rows = order[start : start + batch]
        width = max(len(ids[i]) for i in rows)
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for r, i in enumerate(rows):
            input_ids[r, : len(ids[i])] = ids[i]
            mask[r, : len(ids[i])] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if with_types:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        out[rows] = session.run(None, feeds)[0]
    return out, time.perf_counter() - started


def _torch(data: Path, texts: list[str], device: str, batch: int) -> tuple[Any, float]:
    """Vectors and seconds of sentence-transformers on ``device`` (float32)."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(
        str(data / "model"), device=device, local_files_only=True,
        model_kwargs={"dtype": torch.float32},
    )  # fmt: skip
    model.encode(texts[:batch], batch_size=batch)  # warm-up: kernels, allocator
    if device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=batch, normalize_embeddings=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return vectors, time.perf_counter() - started


def measure(data: Path, out: Path, devices: list[str]) -> None:
    import numpy as np

    texts = json.loads((data / "texts.json").read_text())
    result: dict[str, Any] = {"chunks": len(texts), "runs": {}}
    try:
        import torch

        result["torch"] = torch.__version__
        result["cpu_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            result["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    runs = []
    if "cpu" in devices:
        runs += [("onnx-cpu", lambda: _onnx(data, texts, "CPUExecutionProvider", 64)),
                 ("torch-cpu", lambda: _torch(data, texts, "cpu", 64))]  # fmt: skip
    if "cuda" in devices and "gpu" not in result:
        result["cuda"] = "no CUDA device that PyTorch sees: CPU runs only"
    elif "cuda" in devices:
        import onnxruntime as ort

        runs.append(("torch-cuda", lambda: _torch(data, texts, "cuda", 256)))
        if "CUDAExecutionProvider" in ort.get_available_providers():
            runs.append(("onnx-cuda", lambda: _onnx(data, texts, "CUDAExecutionProvider", 256)))
    vectors: dict[str, Any] = {}
    for name, run in runs:
        got, seconds = run()
        vectors[name] = np.asarray(got, dtype=np.float32)
        result["runs"][name] = {"seconds": seconds, "chunks_per_s": len(texts) / seconds}
        print(name, f"{len(texts) / seconds:.1f} chunks/s", flush=True)
    if "onnx-cpu" in vectors:
        for name, got in vectors.items():
            cosine = np.sum(got * vectors["onnx-cpu"], axis=1)
            result["runs"][name]["min_cosine_to_onnx_cpu"] = float(cosine.min())
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_embedding.json").write_text(json.dumps(result, indent=2))


def report(path: Path) -> None:
    sys.path.insert(0, str(REPO))
    from benchmarks.report import save

    result = json.loads(path.read_text())
    base = result["runs"].get("onnx-cpu", {}).get("chunks_per_s")
    lines = [
        "| path | chunks/s | ÷ ONNX on the CPU | min cosine to ONNX on the CPU |",
        "|---|---|---|---|",
    ]
    for name, run in result["runs"].items():
        ratio = f"{run['chunks_per_s'] / base:.2f}" if base else "–"
        cosine = run.get("min_cosine_to_onnx_cpu", float("nan"))
        lines.append(f"| {name} | {run['chunks_per_s']:.1f} | {ratio} | {cosine:.6f} |")
    where = f"{result.get('gpu', 'no GPU')}, PyTorch {result.get('torch', '?')}, " \
        f"{result.get('cpu_threads', '?')} CPU threads"  # fmt: skip
    markdown = (
        f"The bundled all-MiniLM-L6-v2 on {result['chunks']} chunk texts of the Hub "
        f"vault, each path once after a warm-up (tokenizing included), on the device "
        f"machine ({where}); the Machine line above is where this report was written.\n\n"
        + "\n".join(lines)
    )
    save(
        "gpu_embedding", result, markdown, "python -m benchmarks.gpu_embedding (see its docstring)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("prepare")
    p.add_argument("--index", type=Path, required=True, help="a ragline data folder")
    p.add_argument("--data", type=Path, default=REPO / ".device")
    p.add_argument("--chunks", type=int, default=CHUNKS)
    m = steps.add_parser("measure")
    m.add_argument("--data", type=Path, default=REPO / ".device")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--devices", default="cpu,cuda")
    r = steps.add_parser("report")
    r.add_argument("--result", type=Path, required=True)
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.index, args.data, args.chunks)
    elif args.step == "measure":
        measure(args.data, args.out, args.devices.split(","))
    else:
        report(args.result)


if __name__ == "__main__":
    main()
