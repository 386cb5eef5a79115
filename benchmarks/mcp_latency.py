"""Warm `search` latency through the MCP server against the engine it wraps.

One process, one index, one `SearchEngine`: each of N queries is timed through the
in-process MCP client (`Client(server)`: argument validation, access control,
structured output, the worker-thread hop) and directly through `SearchEngine.search`,
alternating so that drift hits both alike.

    python benchmarks/mcp_latency.py --config path/to/ragline.toml
    python benchmarks/mcp_latency.py --data-dir /tmp/ragline-bench/hub
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import save


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def stats(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "mean": round(statistics.fmean(values), 2),
    }


def load_config(config: Path | None, data_dir: Path | None) -> tuple[Any, str]:
    """The config to benchmark and the flag that names it (for the reproduce line)."""
    import tomli_w

    from rag_serving.config import parse_config_file

    if config is not None:
        return parse_config_file(config), f"--config {config}"
    assert data_dir is not None
    path = Path(tempfile.mkdtemp(prefix="ragline-mcp-bench-")) / "ragline.toml"
    path.write_bytes(tomli_w.dumps({"data_dir": str(data_dir.resolve())}).encode())
    return parse_config_file(path), f"--data-dir {data_dir}"


def sample_queries(engine: Any, count: int) -> list[str]:
    """Queries drawn from the index itself: half note titles, half chunk openings."""
    rng = random.Random(7)
    titles = engine.store.read("documents", columns=["title"]).column("title").to_pylist()
    texts = engine.store.read(engine.generation.table, columns=["text"]).column("text").to_pylist()
    queries = rng.sample(titles, min(len(titles), count // 2))
    for text in rng.sample(texts, min(len(texts), count * 3)):
        words = [w for w in text.split() if w.isalpha()]
        if len(words) >= 4:
            queries.append(" ".join(words[:8]))
        if len(queries) >= count:
            break
    while len(queries) < count:  # a tiny index: reuse what there is
        queries.append(queries[len(queries) % max(1, len(queries))])
    return queries[:count]


async def measure(config: Any, count: int, k: int) -> dict[str, Any]:
    from mcp import Client

    from rag_serving.mcp import build_server
    from rag_serving.mcp.service import RaglineService

    service = RaglineService(config)
    server = build_server(config, service=service)
    engine = service.engine
    queries = sample_queries(engine, count)
    direct: list[float] = []
    through_mcp: list[float] = []
    mismatches = 0
    async with Client(server) as client:
        for query in queries[:5]:  # warm the model, caches and the client session
            engine.search(query, k=k)
            await client.call_tool("search", {"query": query, "k": k})
        for query in queries:
            started = time.perf_counter()
            expected = engine.search(query, k=k)
            direct.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            result = await client.call_tool("search", {"query": query, "k": k})
            through_mcp.append((time.perf_counter() - started) * 1000)
            got = [h["chunk_id"] for h in (result.structured_content or {}).get("hits", [])]
            mismatches += got != [h.chunk_id for h in expected.hits]
    assert engine.generation is not None
    return {
        "index": str(config.data_dir),
        "chunks": engine.store.count(engine.generation.table),
        "queries": len(queries),
        "k": k,
        "direct_ms": stats(direct),
        "mcp_ms": stats(through_mcp),
        "ratio_p50": round(percentile(through_mcp, 50) / percentile(direct, 50), 2),
        "ratio_p95": round(percentile(through_mcp, 95) / percentile(direct, 95), 2),
        "overhead_p50_ms": round(percentile(through_mcp, 50) - percentile(direct, 50), 2),
        "result_mismatches": mismatches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", type=Path, help="A ragline.toml whose index to use.")
    where.add_argument("--data-dir", type=Path, help="An index directory (no sources needed).")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()

    config, flag = load_config(args.config, args.data_dir)
    data = asyncio.run(measure(config, args.queries, args.k))
    print(data)
    d, m = data["direct_ms"], data["mcp_ms"]
    markdown = "\n".join([
        f"Index: {data['chunks']} chunks. {data['queries']} queries drawn from the index (half note "
        f"titles, half chunk openings), k = {data['k']}, hybrid mode, one warm process.",
        "",
        "| warm `search` | p50 ms | p95 ms | mean ms |", "|---|---|---|---|",
        f"| `SearchEngine.search` (direct) | {d['p50']} | {d['p95']} | {d['mean']} |",
        f"| MCP `search` tool, in-process client | {m['p50']} | {m['p95']} | {m['mean']} |",
        "",
        f"MCP / direct: **{data['ratio_p50']}** at p50, **{data['ratio_p95']}** at p95 "
        f"({data['overhead_p50_ms']} ms added at p50: argument validation, access control, "
        "structured output and the hop to a worker thread). Queries whose hits differed: "
        f"{data['result_mismatches']}.",
    ])  # fmt: skip
    save("mcp_latency", data, markdown, f"python benchmarks/mcp_latency.py {flag}")


if __name__ == "__main__":
    main()
