"""Warm search latency of two revisions on one existing index, in the same run.

Each revision is checked out into its own git worktree and searched by a process
whose ``PYTHONPATH`` is that worktree (so it imports that revision's search code),
the same queries (drawn from the corpus: half note titles, half chunk openings) on
the same index, the revisions taking turns round by round, so a noisy neighbour
hurts both alike. For ranking changes that need no re-index (issue 31): the index is
built once, by either revision. A revision whose full-text format differs searches
its own copy (``--old-config``: a copy of the index's data folder, whose Tantivy index
that revision's `ragline index` rebuilt from the same LanceDB tables; nothing is
embedded again).

    python benchmarks/search_latency_compare.py --old b8d79b0 --new HEAD \\
        --config /tmp/hub/ragline.toml [--old-config /tmp/hub-old/ragline.toml] \\
        [--rounds 3] [--queries 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import save
from benchmarks.revision_compare import worktree

MODES = ("hybrid", "bm25", "vector")
# Run inside each worktree (this checkout's benchmarks/ copied there): time `count`
# warm searches per mode, print JSON.
PROBE = r"""
import json, statistics, sys, time
from pathlib import Path
from benchmarks.query_latency import sample_queries
from rag_serving.config import parse_config_file
from rag_serving.search import SearchEngine

config, count = Path(sys.argv[1]), int(sys.argv[2])
engine = SearchEngine(parse_config_file(config))
queries = sample_queries(engine.store, engine.generation.table, count)
for q in queries[:5]:
    engine.search(q)
out = {"chunks": engine.store.count(engine.generation.table)}
for mode in ("hybrid", "bm25", "vector"):
    times = []
    for q in queries:
        started = time.perf_counter()
        engine.search(q, k=10, mode=mode)
        times.append((time.perf_counter() - started) * 1000)
    out[mode] = statistics.median(times)
print(json.dumps(out))
"""


def probe(tree: Path, config: Path, queries: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(config), str(queries)],
        env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree,
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"the probe in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument(
        "--old-config", type=Path, help="the old revision's copy (default --config)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ragline-latency-"))
    old, old_sha = worktree(args.old, folder)
    new, new_sha = worktree(args.new, folder)
    rounds: list[dict[str, Any]] = []
    try:
        for n in range(args.rounds):
            before = probe(old, args.old_config or args.config, args.queries)
            after = probe(new, args.config, args.queries)
            rounds.append({"old": before, "new": after})
            print(n, before, after, flush=True)
    finally:
        for tree in (old, new):
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], check=False)
    chunks = rounds[0]["new"]["chunks"]
    rows = [
        f"| mode | `{old_sha}` p50 ms | `{new_sha}` p50 ms | new ÷ old (median of rounds) "
        "| per round |",
        "|---|---|---|---|---|",
    ]
    for mode in MODES:
        ratios = [r["new"][mode] / r["old"][mode] for r in rounds]
        rows.append(
            f"| `{mode}` | {statistics.median(r['old'][mode] for r in rounds):.2f} "
            f"| {statistics.median(r['new'][mode] for r in rounds):.2f} "
            f"| **{statistics.median(ratios):.3f}** | {', '.join(f'{x:.3f}' for x in ratios)} |"
        )
    text = (
        f"Warm search p50 (k = 10, {args.queries} queries drawn from the corpus) of "
        f"`{old_sha}` and `{new_sha}` on one index of {chunks:,} chunks (the whole Obsidian "
        f"Hub), each revision's own search code and default settings, {args.rounds} rounds "
        "in turns. HUB_CONFIG: a config with one markdown source of "
        "`../shared/data/corpora/obsidian-hub`, indexed once with `ragline index`."
        + (
            f" `{old_sha}` searched a copy of it whose full-text index its own "
            "`ragline index` rebuilt from the same LanceDB tables (another full-text format)."
            if args.old_config
            else ""
        )
        + "\n\n"
        + "\n".join(rows)
    )
    save(
        "search_latency_compare",
        {"old": old_sha, "new": new_sha, "rounds": rounds},
        text,
        f"python benchmarks/search_latency_compare.py --old {args.old} --new {args.new} "
        "--config HUB_CONFIG" + (" --old-config OLD_COPY_CONFIG" if args.old_config else ""),
    )


if __name__ == "__main__":
    main()
