"""The BEIR sets of ../shared/data/eval that issue 5 measures, their splits, the
issue's nDCG@10 targets and its anchors (measured on this machine, same model), and
`ragline eval` run on one of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SETS = {"cranfield": "test", "cisi": "test", "cosqa": "dev", "scifact": "train"}
TARGETS = {
    "scifact": 0.73,
    "cranfield": 0.44,
    "cisi": 0.45,
    "cosqa": 0.62,
}  # issue 14 (issue 5: 0.72 / 0.43 / 0.45 / 0.61)
ANCHORS = {  # plain Tantivy BM25 / exact MiniLM cosine / RRF k=60 equal
    "scifact": (0.677, 0.660, 0.710), "cranfield": (0.371, 0.382, 0.413),
    "cisi": (0.310, 0.419, 0.404), "cosqa": (0.383, 0.603, 0.532),
}  # fmt: skip


def ragline_eval(
    name: str,
    data_dir: Path,
    config: Path | None = None,
    mode: str = "all",
    limit: int | None = None,
) -> list[dict]:
    """`ragline eval --json` on set ``name`` with its index kept in ``data_dir``: one
    result per mode."""
    from benchmarks.report import SHARED_DATA

    proc = subprocess.run(
        [sys.executable, "-m", "ragline.cli", *(["--config", str(config)] if config else []),
         "eval", str(SHARED_DATA / "eval" / name), "--split", SETS[name], "--mode", mode,
         "--json", "--data-dir", str(data_dir),
         *(["--limit-queries", str(limit)] if limit else [])],
        capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"ragline eval {name} ({config or 'defaults'}) failed:\n{proc.stderr}")
    return json.loads(proc.stdout)


def ndcg_by_mode(results: list[dict]) -> dict[str, float]:
    return {r["mode"]: r["ndcg@10"] for r in results}
