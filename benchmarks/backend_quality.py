"""Retrieval quality of the ONNX Runtime document backend against PyTorch.

    python benchmarks/backend_quality.py [--torch-root /tmp/ragline-eval]
        [--onnx-root /tmp/ragline-eval-onnx] [--sets cranfield,cisi,cosqa]

Each set is indexed twice through ``ragline eval --data-dir``: once with
``[embedder] document_backend = "torch"`` (sentence-transformers) and once with the
ONNX export, then evaluated in every mode with the same search settings. ONNX stays
the default only if nDCG@10 moves by at most 0.005 on every set and mode (issue 5).
An index already in a root is reused (the backend is not an index setting), so give
fresh roots, or roots built by this script, for a clean comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.beir_sets import SETS, ndcg_by_mode, ragline_eval
from benchmarks.report import save

TOLERANCE = 0.005


def evaluate(name: str, backend: str, data_dir: Path, work: Path) -> dict[str, float]:
    config = work / f"{backend}.toml"
    config.write_text(
        f'data_dir = "{work / "unused"}"\n'
        f'[embedder]\nprovider = "sentence-transformers"\ndocument_backend = "{backend}"\n'
    )
    return ndcg_by_mode(ragline_eval(name, data_dir, config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--torch-root", type=Path, default=Path("/tmp/ragline-eval"))
    parser.add_argument("--onnx-root", type=Path, default=Path("/tmp/ragline-eval-onnx"))
    parser.add_argument("--sets", default="cranfield,cisi,cosqa")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragline-backends-"))
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for name in args.sets.split(","):
        rows[name] = {
            "torch": evaluate(name, "torch", args.torch_root / name, work),
            "onnx": evaluate(name, "onnx", args.onnx_root / name, work),
        }
        print(name, json.dumps(rows[name]), flush=True)
    worst = max(
        abs(r["onnx"][mode] - r["torch"][mode]) for r in rows.values() for mode in r["torch"]
    )
    lines = [
        "nDCG@10 of indexes whose documents were embedded by PyTorch (sentence-transformers) "
        "or by the ONNX Runtime export, same queries, same search settings.",
        "",
        "| set | mode | PyTorch | ONNX Runtime | difference |",
        "|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        for mode in r["torch"]:
            diff = r["onnx"][mode] - r["torch"][mode]
            lines.append(
                f"| {name} ({SETS[name]}) | {mode} | {r['torch'][mode]:.4f} | "
                f"{r['onnx'][mode]:.4f} | {diff:+.4f} |"
            )
    verdict = "kept" if worst <= TOLERANCE else "NOT kept"
    lines += ["", f"Largest difference: {worst:.4f} (tolerance {TOLERANCE}): ONNX {verdict}."]
    save("backend_quality", {"ndcg@10": rows, "largest_difference": worst}, "\n".join(lines),
         f"make bench-quality (this step: python benchmarks/backend_quality.py --sets {args.sets})")  # fmt: skip


if __name__ == "__main__":
    main()
