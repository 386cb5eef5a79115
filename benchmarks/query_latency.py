"""Query latency on an existing index (built by index_throughput.py).

Warm: 100 queries per mode through one SearchEngine, against the bare components
of each mode (benchmarks/yardsticks.py: the query embedding, the vector search,
Tantivy BM25, Tantivy's snippets, without ragline's search layer) timed in the
same run, in sequence and isolated. Cold: `ragline search` in a fresh process, against the same
command with the PyTorch query path (`query_backend = "torch"`) and a bare
`python -c pass`.

    python benchmarks/query_latency.py --data-dir /tmp/ragline-bench/hub [--source hub]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import SHARED_DATA, save
from benchmarks.yardsticks import bare_components, timed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def write_config(path: Path, data_dir: Path, source: str, vault: Path, backend: str) -> Path:
    import tomli_w

    path.write_bytes(tomli_w.dumps({
        "data_dir": str(data_dir),
        "embedder": {"provider": "sentence-transformers", "query_backend": backend},
        "sources": [{"name": source, "kind": "markdown", "path": str(vault)}],
    }).encode())  # fmt: skip
    return path


def sample_queries(store, table: str, count: int) -> list[str]:
    """Queries drawn from the corpus itself: half note titles, half chunk openings."""
    rng = random.Random(7)
    titles = store.read("documents", columns=["title"]).column("title").to_pylist()
    texts = store.read(table, columns=["text"]).column("text").to_pylist()
    queries = [t for t in rng.sample(titles, count // 2)]
    for text in rng.sample(texts, count * 3):
        words = [w for w in text.split() if w.isalpha()]
        if len(words) >= 6:
            queries.append(" ".join(words[:8]))
        if len(queries) >= count:
            break
    return queries[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--source", default="hub")
    parser.add_argument("--vault", type=Path, default=SHARED_DATA / "corpora" / "obsidian-hub")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--cold-runs", type=int, default=5)
    args = parser.parse_args()

    from rag_serving.config import parse_config_file
    from rag_serving.search import SearchEngine

    work = Path(tempfile.mkdtemp(prefix="ragline-query-"))
    onnx_config = write_config(work / "onnx.toml", args.data_dir, args.source, args.vault, "onnx")
    torch_config = write_config(
        work / "torch.toml", args.data_dir, args.source, args.vault, "torch"
    )
    engine = SearchEngine(parse_config_file(onnx_config))
    queries = sample_queries(engine.store, engine.generation.table, args.queries)
    for q in queries[:5]:
        engine.search(q, mode="hybrid")  # warm caches and the model

    warm: dict[str, list[float]] = {}
    stages: dict[str, dict[str, list[float]]] = {}
    for mode in ("hybrid", "bm25", "vector"):
        split: dict[str, list[float]] = {}

        def run(q: str, m: str = mode, split: dict[str, list[float]] = split) -> None:
            for name, ms in engine.search(q, k=10, mode=m).timings.items():
                split.setdefault(name, []).append(ms)

        warm[mode] = timed(run, queries)
        stages[mode] = split

    # The bare components, same queries, same process (benchmarks/yardsticks.py),
    # and LanceDB's own flat search for comparison with the numpy scan.
    bare = bare_components(engine, queries)
    embedder = engine.embedder
    vectors = {q: embedder.embed_query(q) for q in queries}
    table = engine.store.chunks(engine.generation.table)
    bare_lancedb = timed(
        lambda q: (
            table.search(vectors[q])
            .distance_type("cosine")
            .limit(50)
            .select(["chunk_id", "_distance"])
            .to_arrow()
        ),
        queries,
    )
    # Recall@10 of the warm vector search against an exact scan of the same vectors.
    import numpy as np

    loaded = table.search().select(["chunk_id", "vector"]).limit(None).to_arrow()
    ids = loaded.column("chunk_id").to_pylist()
    flat = loaded.column("vector").combine_chunks().values.to_numpy(zero_copy_only=False)
    matrix = np.array(flat, dtype=np.float32).reshape(len(ids), -1)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    recall = []
    for q in queries:
        sims = matrix @ np.asarray(vectors[q], dtype=np.float32)
        exact = {ids[i] for i in np.argpartition(-sims, 10)[:10]}
        got = {h.chunk_id for h in engine.search(q, k=10, mode="vector").hits}
        recall.append(len(exact & got) / 10)

    def cold(config: Path) -> list[float]:
        runs = []
        for q in queries[: args.cold_runs]:
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "ragline.cli", "--config", str(config), "search", q, "--json"],
                capture_output=True, text=True,
            )  # fmt: skip
            runs.append(time.perf_counter() - started)
            assert proc.returncode == 0, proc.stderr
        return runs

    python_floor = []
    for _ in range(args.cold_runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_floor.append(time.perf_counter() - started)
    cold_onnx = cold(onnx_config)
    cold_torch = cold(torch_config)

    def stats(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2)}

    data = {
        "chunks": engine.store.count(engine.generation.table),
        "queries": len(queries),
        "warm_ms": {mode: stats(v) for mode, v in warm.items()},
        "bare": bare,
        "lancedb_flat_top50_ms": stats(bare_lancedb),
        "stage_p50_ms": {
            mode: {name: round(statistics.median(v), 2) for name, v in split.items()}
            for mode, split in stages.items()
        },
        "vector_recall_at_10_vs_exact": round(statistics.mean(recall), 4),
        "cold_s": {
            "ragline_search_onnx_query_path": round(statistics.median(cold_onnx), 2),
            "ragline_search_torch_query_path": round(statistics.median(cold_torch), 2),
            "python_startup": round(statistics.median(python_floor), 3),
        },
    }
    p50 = {mode: percentile(warm[mode], 50) for mode in warm}
    data["p50_vs_bare_isolated"] = {
        mode: round(p50[mode] / bare["isolated_sum_p50_ms"][mode], 2) for mode in warm
    }
    data["p50_vs_bare_in_sequence"] = {
        mode: round(p50[mode] / bare["in_sequence_p50_ms"][mode], 2) for mode in warm
    }
    data["hybrid_p50_vs_bare_in_sequence"] = data["p50_vs_bare_in_sequence"]["hybrid"]
    data["cold_onnx_vs_torch"] = round(
        statistics.median(cold_onnx) / statistics.median(cold_torch), 2
    )
    print(data)
    w, c = data["warm_ms"], data["cold_s"]
    iso, seq = data["p50_vs_bare_isolated"], data["p50_vs_bare_in_sequence"]
    markdown = "\n".join([
        f"Index: {data['chunks']} chunks. {len(queries)} queries drawn from the corpus (half note titles, half chunk openings), k = 10.",
        "",
        "| warm, one process | p50 ms | p95 ms | its bare components, in sequence / isolated (p50 ms) | p50 ÷ bare in sequence | p50 ÷ bare isolated |",
        "|---|---|---|---|---|---|",
        *(f"| `{mode}` search | {w[mode]['p50']} | {w[mode]['p95']} | {bare['in_sequence_p50_ms'][mode]} / {bare['isolated_sum_p50_ms'][mode]} | **{seq[mode]}** | {iso[mode]} |" for mode in w),
        "",
        "Bare components (benchmarks/yardsticks.py): the same library calls without ragline's search layer, at the depths a search asks for — "
        + "; ".join(f"`{mode}` = " + " + ".join(names) for mode, names in bare["modes"].items())
        + ". *In sequence*: one query's components back to back, as a search runs them; *isolated*: each component over all queries before the next (its caches stay warm). "
        + "Isolated p50 ms: " + ", ".join(f"{name} {ms}" for name, ms in bare["isolated_p50_ms"].items())
        + f"; LanceDB's own flat top-50 {data['lancedb_flat_top50_ms']['p50']} (the warm engine scans its in-memory copy instead). "
        f"Vector recall@10 against the exact scan: {data['vector_recall_at_10_vs_exact']}.",
        "",
        "Where a warm search's time goes (p50 ms per stage, `SearchResult.timings`, also in `--explain`):",
        "",
        "| mode | " + " | ".join(data["stage_p50_ms"]["hybrid"]) + " |",
        "|---|" + "---|" * len(data["stage_p50_ms"]["hybrid"]),
        *(
            f"| `{mode}` | " + " | ".join(str(split.get(name, "–")) for name in data["stage_p50_ms"]["hybrid"]) + " |"
            for mode, split in data["stage_p50_ms"].items()
        ),
        "",
        f"| cold `ragline search --json`, fresh process (median of {args.cold_runs}) | seconds |", "|---|---|",
        f"| ONNX query path (default) | **{c['ragline_search_onnx_query_path']}** |",
        f"| PyTorch query path (`query_backend = \"torch\"`) | {c['ragline_search_torch_query_path']} |",
        f"| `python -c pass` | {c['python_startup']} |",
        "",
        f"Cold search with the ONNX path / with the PyTorch path: **{data['cold_onnx_vs_torch']}**. Target: ≤ 4 s.",
    ])  # fmt: skip
    save(
        "query_latency",
        data,
        markdown,
        "make bench (this step: python benchmarks/query_latency.py --vault VAULT_COPY --data-dir DIR)",
    )


if __name__ == "__main__":
    main()
