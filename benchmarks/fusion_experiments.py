"""Retrieval quality of every fusion setting tried, on the BEIR sets in
../shared/data/eval, each measured with `ragline eval` on the same index.

    python benchmarks/fusion_experiments.py [--eval-root /tmp/ragline-eval] [--sets cranfield,cisi,...]

Each set's index is built once (by the first `ragline eval` with --data-dir) and
reused for every setting: only search-time settings change between rows. The wide
sweep of ideas is benchmarks/fusion_lab.py; this re-measures the chosen default and
the earlier ones end to end, through `ragline eval`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.beir_sets import ANCHORS, SETS, TARGETS, ragline_eval
from benchmarks.report import save

SETTINGS: dict[str, dict] = {
    "zscore, bm25 weight 0.3, 200 candidates, query-vector feedback (default)": {},
    "the same without query-vector feedback (before)": {"feedback": {"enabled": False}},
    "zscore, bm25 weight 0.5, 200 candidates": {"weights": {"bm25": 0.5, "vector": 1.0}},
    "rrf k=60, equal weights, 200 candidates": {
        "fusion": "rrf", "weights": {"bm25": 1.0, "vector": 1.0},
    },
    "convex (min-max), bm25 weight 0.5, 50 candidates (previous default)": {
        "fusion": "convex", "weights": {"bm25": 0.5, "vector": 1.0}, "candidates": 50,
    },
    "rrf k=60, equal weights, 50 candidates (first default)": {
        "fusion": "rrf", "weights": {"bm25": 1.0, "vector": 1.0}, "candidates": 50,
    },
}  # fmt: skip


def run_eval(
    name: str, data_dir: Path, search: dict, mode: str, work: Path, limit: int | None
) -> list[dict]:
    import tomli_w

    config = work / f"{name}-{abs(hash(json.dumps(search, sort_keys=True)))}.toml"
    config.write_bytes(tomli_w.dumps({"data_dir": str(work / "unused"), "search": search}).encode())
    return ragline_eval(name, data_dir, config, mode, limit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eval-root", type=Path, default=Path("/tmp/ragline-eval"))
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument(
        "--limit-queries", type=int, default=None, help="first N judged queries per set"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragline-fusion-"))
    results: dict[str, dict[str, float]] = {}
    for name in args.sets.split(","):
        data_dir = args.eval_root / name
        singles = {
            r["mode"]: r for r in run_eval(name, data_dir, {}, "all", work, args.limit_queries)
        }
        row = {"bm25 only": singles["bm25"]["ndcg@10"], "vector only": singles["vector"]["ndcg@10"]}
        for label, search in SETTINGS.items():
            row[label] = run_eval(name, data_dir, search, "hybrid", work, args.limit_queries)[0][
                "ndcg@10"
            ]
            print(name, label, row[label], flush=True)
        row["queries"] = singles["bm25"]["queries"]
        results[name] = row
    names = list(results)
    labels = ["bm25 only", "vector only", *SETTINGS]
    lines = [
        "nDCG@10 per set (split) through `ragline eval`; every setting runs on the same "
        "index of that set. `ragline eval` ranks 100 documents per query, so each list is "
        "read at least 100 chunks deep whatever `candidates` says. Every row but "
        '"without" has query-vector feedback on (`[search] feedback`, the default).',
        "",
        "| setting | " + " | ".join(f"{n} ({SETS[n]})" for n in names) + " |",
        "|---|" + "---|" * len(names),
        "| *anchor: plain Tantivy BM25 (issue 5)* | "
        + " | ".join(f"{ANCHORS[n][0]:.3f}" for n in names)
        + " |",
        "| *anchor: exact MiniLM cosine (issue 5)* | "
        + " | ".join(f"{ANCHORS[n][1]:.3f}" for n in names)
        + " |",
        "| *anchor: RRF k=60 equal (issue 5)* | "
        + " | ".join(f"{ANCHORS[n][2]:.3f}" for n in names)
        + " |",
    ]
    for label in labels:
        cells = []
        for n in names:
            value = results[n][label]
            mark = " ✓" if value >= TARGETS[n] and label not in ("bm25 only", "vector only") else ""
            cells.append(f"{value:.3f}{mark}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("| **target** | " + " | ".join(f"≥ {TARGETS[n]:.2f}" for n in names) + " |")
    lines.append(
        "| queries evaluated | " + " | ".join(str(results[n]["queries"]) for n in names) + " |"
    )
    save("fusion_experiments", {"ndcg@10": results}, "\n".join(lines),
         "make bench-quality (this step: python benchmarks/fusion_experiments.py)")  # fmt: skip


if __name__ == "__main__":
    main()
