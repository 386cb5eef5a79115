"""Retrieval quality with another local embedding model beside the bundled one, on
the BEIR sets in ../shared/data/eval, through `ragline eval` (default search
settings), both measured in the same run.

    python benchmarks/embedder_quality.py --model /path/to/sentence-transformers-folder
        [--name all-mpnet-base-v2] [--sets cranfield,cisi] [--eval-root /tmp/ragline-eval]
        [--work /tmp/ragline-eval-models]

The bundled model's indexes are those of fusion_experiments (``--eval-root``, built
by the first run when missing); the other model's go under ``--work/<name>/<set>``
and are reused by later runs. Indexing seconds are the other model's own (a fresh
index; the bundled model's indexes are reused, so its seconds are not comparable
within the run and are left out). Nothing is downloaded: the model is a folder on
disk, the way a user points `[embedder] model` at one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.beir_sets import SETS, TARGETS, ndcg_by_mode, ragline_eval
from benchmarks.report import save

MODES = ("hybrid", "bm25", "vector")


def run_eval(name: str, data_dir: Path, config: Path | None) -> dict[str, float]:
    """nDCG@10 per mode of ``ragline eval`` on set ``name``."""
    return ndcg_by_mode(ragline_eval(name, data_dir, config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--name", default=None, help="label (default: the folder's name)")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--eval-root", type=Path, default=Path("/tmp/ragline-eval"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragline-eval-models"))
    args = parser.parse_args()
    import tomli_w

    label = args.name or args.model.name
    work = args.work / label
    work.mkdir(parents=True, exist_ok=True)
    config = work / "ragline.toml"
    config.write_bytes(
        tomli_w.dumps(
            {"data_dir": str(work / "unused"), "embedder": {"model": str(args.model.resolve())}}
        ).encode()
    )
    results: dict[str, dict] = {}
    for name in args.sets.split(","):
        bundled = run_eval(name, args.eval_root / name, None)
        fresh = not (work / name).exists()
        started = time.perf_counter()
        other = run_eval(name, work / name, config)
        seconds = round(time.perf_counter() - started, 1) if fresh else None
        results[name] = {"bundled": bundled, "other": other, "seconds": seconds}
        print(name, results[name], flush=True)

    names = list(results)
    lines = [
        f"nDCG@10 through `ragline eval` with the default search settings; *{label}* is a "
        "local sentence-transformers folder given as `[embedder] model` (each set indexed "
        "once for it), MiniLM the bundled model, both in the same run.",
        "",
        "| model | mode | " + " | ".join(f"{n} ({SETS[n]})" for n in names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for key, title in (("bundled", "all-MiniLM-L6-v2 (bundled)"), ("other", label)):
        for mode in MODES:
            cells = [f"{results[n][key][mode]:.3f}" for n in names]
            lines.append(f"| {title} | {mode} | " + " | ".join(cells) + " |")
    lines.append(
        "| **hybrid target (issue 14)** | | " + " | ".join(f"≥ {TARGETS[n]}" for n in names) + " |"
    )
    seconds = [results[n]["seconds"] for n in names]
    if any(s is not None for s in seconds):
        lines.append(
            f"| {label}: eval seconds on a fresh index (indexing included) | | "
            + " | ".join("—" if s is None else f"{s:.0f}" for s in seconds)
            + " |"
        )
    save(
        "embedder_quality",
        {"model": label, "results": results},
        "\n".join(lines),
        f"python benchmarks/embedder_quality.py --model MODEL_DIR --name {label} "
        f"--sets {args.sets}",
    )


if __name__ == "__main__":
    main()
