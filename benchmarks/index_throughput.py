"""Index a real vault from empty through the Dagster job and compare with the bare
embedder on the same chunks, in the same run.

Reports documents/s, chunks/s, peak memory (RSS), the share of wall time spent
inside the embedder, and the bare embedder's throughput on a seeded random sample
of the very chunks the pipeline produced, with the configured document backend
(ONNX Runtime by default) and with PyTorch (sentence-transformers) on the same sample.

    python benchmarks/index_throughput.py [--vault PATH] [--notes N] [--data-dir DIR]
        [--bare-sample 0.2]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import SHARED_DATA, save


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vault", type=Path, default=SHARED_DATA / "corpora" / "obsidian-hub")
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="kept afterwards (for query_latency.py)"
    )
    parser.add_argument(
        "--bare-sample", type=float, default=0.2, help="share of chunks for the bare run"
    )
    parser.add_argument(
        "--notes", type=int, default=None, help="index only the first N notes (sorted paths)"
    )
    args = parser.parse_args()

    import tomli_w

    from rag_assets import resources
    from rag_serving.config import parse_config_file
    from rag_serving.index.store import IndexStore
    from ragline.indexing import index_sources

    work = Path(tempfile.mkdtemp(prefix="ragline-bench-"))
    vault = args.vault
    if args.notes:
        vault = work / "vault"
        notes = sorted(p for p in args.vault.rglob("*.md") if p.is_file())[: args.notes]
        for note in notes:
            target = vault / note.relative_to(args.vault)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(note, target)
    data_dir = (args.data_dir or work / "data").resolve()
    shutil.rmtree(data_dir, ignore_errors=True)
    config_path = work / "ragline.toml"
    config_path.write_bytes(tomli_w.dumps({
        "data_dir": str(data_dir),
        "sources": [{"name": "hub", "kind": "markdown", "path": str(vault)}],
    }).encode())  # fmt: skip
    config = parse_config_file(config_path)

    # Time spent inside the real embedder: wrap its method on the shared instance.
    embedder = resources._embedder(config.embedder.model_dump_json(), str(config.data_dir))
    inner = embedder.embed_documents
    spent = {"seconds": 0.0, "chunks": 0}

    def timed(texts):
        started = time.perf_counter()
        out = inner(texts)
        spent["seconds"] += time.perf_counter() - started
        spent["chunks"] += len(texts)
        return out

    embedder.embed_documents = timed  # type: ignore[method-assign]
    inner(["load the model (and make the ONNX export) before the clock starts"])

    started = time.perf_counter()
    outcomes = index_sources(config, [], full=False)
    wall = time.perf_counter() - started
    assert all(o.success for o in outcomes), [o.error for o in outcomes]
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    store = IndexStore(data_dir)
    documents = store.count("documents")
    from rag_serving.index.manifest import read_manifest

    generation = read_manifest(store.layout.manifest_path).active
    chunks = store.count(generation.table)
    texts = store.read("staged_chunks", columns=["embed_text"]).column("embed_text").to_pylist()
    rng = random.Random(42)
    sample = rng.sample(texts, max(1, int(len(texts) * args.bare_sample)))
    bare_started = time.perf_counter()
    inner(sample)
    bare_seconds = time.perf_counter() - bare_started
    bare_rate = len(sample) / bare_seconds
    torch_started = time.perf_counter()
    embedder._embed_torch(sample)  # type: ignore[attr-defined]
    torch_rate = len(sample) / (time.perf_counter() - torch_started)
    # The former document path: PyTorch's own ONNX export of the same weights.
    import onnxruntime as ort

    exported = work / "export" / "encoder.onnx"
    exported.parent.mkdir(parents=True, exist_ok=True)
    embedder._export_onnx(exported)  # type: ignore[attr-defined]
    export_session = ort.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    export_started = time.perf_counter()
    embedder._embed_onnx(export_session, sample)  # type: ignore[attr-defined]
    export_rate = len(sample) / (time.perf_counter() - export_started)
    pipeline_rate = chunks / wall
    meta = outcomes[0].metadata
    data = {
        "vault": str(args.vault),
        "notes_limit": args.notes,
        "document_backend": config.embedder.document_backend,
        "documents": documents,
        "chunks": chunks,
        "failed_files": meta.get("parsed_documents", {}).get("failed", 0),
        "wall_s": round(wall, 1),
        "documents_per_s": round(documents / wall, 1),
        "chunks_per_s": round(pipeline_rate, 1),
        "embedder_s": round(spent["seconds"], 1),
        "embedder_share_of_wall": round(spent["seconds"] / wall, 3),
        "peak_rss_mib": round(peak_rss_mib),
        "bare_sample_chunks": len(sample),
        "bare_chunks_per_s": round(bare_rate, 1),
        "pipeline_vs_bare_throughput": round(pipeline_rate / bare_rate, 3),
        "bare_torch_chunks_per_s": round(torch_rate, 1),
        "backend_vs_torch_throughput": round(bare_rate / torch_rate, 3),
        "bare_torch_export_chunks_per_s": round(export_rate, 1),
        "backend_vs_faster_former_path": round(bare_rate / max(torch_rate, export_rate), 3),
    }
    for key, value in data.items():
        print(f"{key:>28}: {value}")
    table = "\n".join([
        "| measure | value |", "|---|---|",
        f"| documents / chunks | {documents} / {chunks} |",
        f"| wall time, empty → indexed | {data['wall_s']} s |",
        f"| documents/s | {data['documents_per_s']} |",
        f"| chunks/s (pipeline) | {data['chunks_per_s']} |",
        f"| time inside the embedder | {data['embedder_s']} s ({data['embedder_share_of_wall']:.0%} of wall) |",
        f"| bare embedder ({data['document_backend']}), {len(sample)} of the same chunks | {data['bare_chunks_per_s']} chunks/s |",
        f"| **pipeline throughput / bare embedder throughput** | **{data['pipeline_vs_bare_throughput']:.2f}** |",
        f"| bare embedder with PyTorch (sentence-transformers), same sample | {data['bare_torch_chunks_per_s']} chunks/s |",
        f"| **{data['document_backend']} / PyTorch throughput** | **{data['backend_vs_torch_throughput']:.2f}** |",
        f"| bare embedder through PyTorch's ONNX export (the former path), same sample | {data['bare_torch_export_chunks_per_s']} chunks/s |",
        f"| **{data['document_backend']} / the faster of PyTorch and its export** | **{data['backend_vs_faster_former_path']:.2f}** |",
        f"| peak RSS of the indexing process | {data['peak_rss_mib']} MiB |",
    ])  # fmt: skip
    save(
        "index_throughput",
        data,
        table,
        "make bench (this step: python benchmarks/index_throughput.py --vault VAULT_COPY "
        f"--data-dir DIR{f' --notes {args.notes}' if args.notes else ''})",
    )


if __name__ == "__main__":
    main()
