"""index_throughput and query_latency of two revisions, measured in the same run.

Each revision is checked out into its own git worktree, and this checkout's
``benchmarks/`` is copied over the worktree's, so both revisions are measured by the
same scripts (an old revision's own may no longer match its code). They run in a
process whose ``PYTHONPATH`` is the worktree, so it imports that revision's packages. The revisions take turns (old, new, old, new…) so that a
noisy neighbour hurts both alike; the table gives each round and the median ratio.

    python benchmarks/revision_compare.py --old 9563322 --new HEAD [--notes 600] [--rounds 2]
        [--name SECTION]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import REPO, SHARED_DATA, save

# Given to each worktree, whose own default (beside the checkout) does not exist.
VAULT = SHARED_DATA / "corpora" / "obsidian-hub"

# (label, result file, key path, higher is better)
MEASURES: list[tuple[str, str, tuple[str, ...], bool]] = [
    ("indexing chunks/s (pipeline)", "index_throughput", ("chunks_per_s",), True),
    ("indexing wall s", "index_throughput", ("wall_s",), False),
    ("bare embedder chunks/s (its document backend)", "index_throughput",
     ("bare_chunks_per_s",), True),
    ("indexing peak RSS MiB", "index_throughput", ("peak_rss_mib",), False),
    ("warm hybrid p50 ms", "query_latency", ("warm_ms", "hybrid", "p50"), False),
    ("warm bm25 p50 ms", "query_latency", ("warm_ms", "bm25", "p50"), False),
    ("warm vector p50 ms", "query_latency", ("warm_ms", "vector", "p50"), False),
    ("cold `ragline search` s", "query_latency",
     ("cold_s", "ragline_search_onnx_query_path"), False),
]  # fmt: skip


def worktree(revision: str, into: Path) -> tuple[Path, str]:
    """A detached worktree of ``revision`` and its short hash."""
    sha = subprocess.run(
        ["git", "rev-parse", "--short", revision], cwd=REPO, check=True,
        capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    path = into / sha
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-f", str(path), sha], cwd=REPO, check=True,
        capture_output=True,
    )  # fmt: skip
    shutil.copytree(REPO / "benchmarks", path / "benchmarks", dirs_exist_ok=True)
    # The bundled model is unpacked by the install, not tracked: the checkout's own.
    model = Path("rag_serving/embedders/bundled_model")
    if (REPO / model).is_dir() and not (path / model).exists():
        (path / model).symlink_to(REPO / model, target_is_directory=True)
    return path, sha


def measure(tree: Path, data_dir: Path, notes: int, cold_runs: int) -> dict[str, Any]:
    """Run both scripts in ``tree``; their JSON results."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    run = [sys.executable]
    log = (data_dir.parent / f"{tree.name}.log").open("a")
    subprocess.run(
        [*run, "benchmarks/index_throughput.py", "--notes", str(notes),
         "--data-dir", str(data_dir), "--bare-sample", "0.05", "--vault", str(VAULT)],
        cwd=tree, env=env, check=True, stdout=log, stderr=log,
    )  # fmt: skip
    subprocess.run(
        [*run, "benchmarks/query_latency.py", "--data-dir", str(data_dir),
         "--cold-runs", str(cold_runs), "--vault", str(VAULT)],
        cwd=tree, env=env, check=True, stdout=log, stderr=log,
    )  # fmt: skip
    results = tree / "benchmarks" / "results"
    return {
        name: json.loads((results / f"{name}.json").read_text())
        for name in ("index_throughput", "query_latency")
    }


def value(results: dict[str, Any], file: str, keys: tuple[str, ...]) -> float:
    found: Any = results[file]
    for key in keys:
        found = found[key]
    return float(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("--notes", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cold-runs", type=int, default=3)
    parser.add_argument(
        "--name", default="revision_compare", help="the section of docs/benchmarks.md"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ragline-revisions-"))
    trees = [worktree(args.old, work), worktree(args.new, work)]
    rounds: list[dict[str, dict[str, Any]]] = []
    try:
        for number in range(args.rounds):
            found = {}
            for tree, sha in trees:
                print(f"round {number + 1}: {sha} (log: {work / sha}.log)", flush=True)
                found[sha] = measure(tree, work / f"data-{sha}", args.notes, args.cold_runs)
            rounds.append(found)
    finally:
        for tree, _ in trees:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO)
    old, new = trees[0][1], trees[1][1]
    rows, data = [], {"old": old, "new": new, "notes": args.notes, "measures": {}}
    for label, file, keys, higher_better in MEASURES:
        olds = [value(r[old], file, keys) for r in rounds]
        news = [value(r[new], file, keys) for r in rounds]
        ratios = [n / o for o, n in zip(olds, news, strict=True) if o]
        ratio = statistics.median(ratios) if ratios else float("nan")
        data["measures"][label] = {"old": olds, "new": news, "new_over_old": round(ratio, 3)}
        better = "higher is better" if higher_better else "lower is better"
        rows.append(
            f"| {label} ({better}) | {' / '.join(f'{v:g}' for v in olds)} | "
            f"{' / '.join(f'{v:g}' for v in news)} | **{ratio:.2f}** |"
        )
    chunks = rounds[0][new]["index_throughput"]["chunks"]
    markdown = "\n".join([
        f"The first {args.notes} notes of the Obsidian Hub ({chunks} chunks), indexed from empty "
        f"and searched (100 queries, k = 10) by `{old}` and by `{new}`, in turns, "
        f"{args.rounds} rounds; each revision's own worktree runs this checkout's "
        "`index_throughput.py` and `query_latency.py` (the bare-embedder sample at 5 %, "
        f"{args.cold_runs} cold searches each).",
        "",
        f"| measure | `{old}` per round | `{new}` per round | new ÷ old (median) |",
        "|---|---|---|---|",
        *rows,
    ])  # fmt: skip
    print(markdown)
    save(
        args.name, data, markdown,
        f"python benchmarks/revision_compare.py --old {args.old} --new {args.new} "
        f"--notes {args.notes} --rounds {args.rounds} --name {args.name}",
    )  # fmt: skip


if __name__ == "__main__":
    main()
