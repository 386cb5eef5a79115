"""Peak memory of indexing as the corpus grows: does it stay bounded?

Indexes nested, seeded random slices of a real Markdown vault (default: the
Obsidian Hub) of growing size, each into a fresh data dir, through the normal
pipeline (``ragline.indexing.index_sources``: the Dagster job in process, LanceDB,
Tantivy, the bundled MiniLM model), each run in a fresh process:

- ``fresh``: index the slice from empty (every chunk embedded);
- ``full``: then ``--full`` on the same data dir, in another fresh process: every
  stage redoes every document but every vector is reused, so no embedding work
  (and none of its transient memory) hides what the stages themselves hold;
- ``standin``: bigger slices (up to the whole vault) from empty with the Ollama
  provider pointed at the test suite's Ollama stand-in (tests/ollama_standin.py,
  served by the parent process; hashed bag-of-words vectors, 384 dimensions, chunks
  of at most 256 estimated tokens). Everything but the model is the real pipeline,
  at a size the real model would need an hour or more to embed on 2 cores.

Inside each process a thread samples RSS every 50 ms, tagged with the stage running
(the stage functions are wrapped), and ``getrusage`` gives the exact peak. Before
indexing, the same process imports the pipeline, loads the model (with the
configured document backend) and embeds one full-length batch: that RSS is the
baseline, and "above baseline" is what indexing
itself costs.

    python benchmarks/indexing_memory.py [--sizes 150,300,600,1200]
        [--standin-sizes 1600,3200,6571] [--label after]

Runs are kept per ``--label`` in benchmarks/results/indexing_memory.json, so a
"before" and an "after" run of the same command end up in one section.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import RESULTS, SHARED_DATA, git_revision, save

NAME = "indexing_memory"
STAGES = {
    "scan_source": "scan",
    "parse_source": "parse",
    "chunk_source": "chunk",
    "embed_source": "embed",
    "sync_fulltext": "fulltext",
}
STAGE_ORDER = ["scan", "parse", "chunk", "embed", "fulltext", "dagster"]
MODES = ("fresh", "full", "standin")
SAMPLE_S = 0.05


def _mib(value: float) -> float:
    return round(value / 2**20, 1)


def _maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


class Sampler(threading.Thread):
    """Samples this process's RSS every ``SAMPLE_S`` seconds; peak per stage tag."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        import psutil

        self.process = psutil.Process()
        self.stage = "setup"
        self.peaks: dict[str, int] = {}
        self.samples = 0
        self._halt = threading.Event()

    def sample(self) -> None:
        rss = self.process.memory_info().rss
        stage = self.stage
        self.samples += 1
        if rss > self.peaks.get(stage, 0):
            self.peaks[stage] = rss

    def run(self) -> None:
        while not self._halt.wait(SAMPLE_S):
            self.sample()

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.sample()


def _tagged(sampler: Sampler, stage: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with the sampler's stage tag set while it runs; a stage that raised the
    process's maxrss owns that exact peak (the sampler may miss short spikes)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        outer = sampler.stage
        sampler.sample()
        sampler.stage = stage
        before = _maxrss_bytes()
        try:
            return func(*args, **kwargs)
        finally:
            sampler.sample()
            after = _maxrss_bytes()
            if after > before:
                sampler.peaks[stage] = max(sampler.peaks.get(stage, 0), after)
            sampler.stage = outer

    return wrapper


def child(vault: Path, data_dir: Path, out: Path, mode: str, host: str = "") -> None:
    """Index ``vault`` into ``data_dir`` in this process; write measurements to ``out``.
    ``host``: the Ollama stand-in's URL (mode ``standin``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import psutil
    import tomli_w

    sampler = Sampler()
    sampler.start()
    started = time.perf_counter()
    from rag_assets import resources
    from rag_assets.assets import indexing as assets
    from rag_serving.config import parse_config_file
    from rag_serving.index.manifest import read_manifest
    from rag_serving.index.store import IndexStore
    from ragline.indexing import index_sources

    config_path = data_dir.parent / "ragline.toml"
    settings: dict[str, Any] = {
        "data_dir": str(data_dir),
        "sources": [{"name": "hub", "kind": "markdown", "path": str(vault)}],
    }
    if mode == "standin":
        settings["embedder"] = {"provider": "ollama", "model": "all-minilm", "host": host,
                                "max_tokens": 256, "batch_size": 64}  # fmt: skip
    config_path.write_bytes(tomli_w.dumps(settings).encode())
    config = parse_config_file(config_path)
    embedder = resources._embedder(config.embedder.model_dump_json(), str(config.data_dir))
    IndexStore(data_dir)  # lancedb imported and connected
    # Whatever the configured document backend loads (and, on a fresh data dir,
    # exports) before it can embed.
    embedder.embed_documents(["warm up"])
    model_loaded = psutil.Process().memory_info().rss
    # One batch of full-length inputs: the model's working memory belongs to the baseline.
    warm = ["memory " * 300] * int(getattr(embedder.config, "batch_size", 32))
    embedder.embed_documents(warm)
    baseline = psutil.Process().memory_info().rss
    baseline_maxrss = _maxrss_bytes()
    setup_s = time.perf_counter() - started

    for func, stage in STAGES.items():
        setattr(assets, func, _tagged(sampler, stage, getattr(assets, func)))
    sampler.stage = "dagster"  # run set-up, asset checks, event log
    started = time.perf_counter()
    outcomes = index_sources(config, [], full=mode == "full")
    wall = time.perf_counter() - started
    sampler.stop()
    assert all(o.success for o in outcomes), [o.error for o in outcomes]

    store = IndexStore(data_dir)
    generation = read_manifest(store.layout.manifest_path).active
    meta = outcomes[0].metadata
    peaks = {s: v for s, v in sampler.peaks.items() if s != "setup"}
    peak = max(peaks.values())
    if _maxrss_bytes() > baseline_maxrss:  # the exact peak happened while indexing
        peak = max(peak, _maxrss_bytes())
    result = {
        "mode": mode,
        "notes": len(list(vault.rglob("*.md"))),
        "documents": store.count("documents"),
        "chunks": store.count(generation.table),
        "failed_files": meta.get("parsed_documents", {}).get("failed", 0),
        "embedded": meta.get("embeddings", {}).get("embedded", 0),
        "wall_s": round(wall, 1),
        "setup_s": round(setup_s, 1),
        "model_loaded_rss_mib": _mib(model_loaded),
        "baseline_rss_mib": _mib(baseline),
        "baseline_maxrss_mib": _mib(baseline_maxrss),
        "peak_rss_mib": _mib(peak),
        "above_baseline_mib": _mib(peak - baseline),
        "stage_peak_rss_mib": {k: _mib(v) for k, v in peaks.items()},
        "samples": sampler.samples,
    }
    out.write_text(json.dumps(result, indent=2))


def make_slices(vault: Path, sizes: list[int], root: Path, seed: int) -> dict[int, Path]:
    """Nested seeded random slices of the vault's notes, copied under ``root``."""
    notes = sorted(p.relative_to(vault) for p in vault.rglob("*.md"))
    random.Random(seed).shuffle(notes)
    slices = {}
    for size in sizes:
        target = root / f"slice-{size}"
        for rel in notes[:size]:
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(vault / rel, target / rel)
        slices[size] = target
    return slices


def _fit(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of y over x."""
    if len(points) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per mode: slopes (MiB per 1,000 chunks) of the peak above baseline, overall
    and per stage (each stage's own peak above the baseline)."""
    out: dict[str, Any] = {}
    for mode in MODES:
        these = [r for r in rows if r["mode"] == mode]
        overall = _fit([(r["chunks"] / 1000, r["above_baseline_mib"]) for r in these])
        per_stage = {}
        for stage in STAGE_ORDER:
            pts = [
                (r["chunks"] / 1000, r["stage_peak_rss_mib"][stage] - r["baseline_rss_mib"])
                for r in these
                if stage in r["stage_peak_rss_mib"]
            ]
            slope = _fit(pts)
            if slope is not None:
                per_stage[stage] = round(slope, 1)
        out[mode] = {
            "slope_mib_per_1000_chunks": None if overall is None else round(overall, 1),
            "stage_slope_mib_per_1000_chunks": per_stage,
        }
    return out


def _row(rows: list[dict[str, Any]], mode: str, notes: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["mode"] == mode and r["notes"] == notes), None)


def render(runs: dict[str, dict[str, Any]]) -> str:
    """Markdown: per labelled run a table and slopes; then before/after if both exist."""
    parts = [
        "Peak RSS of one indexing process (Dagster job in process) above its own "
        "baseline: the RSS after importing the pipeline, loading the embedder (with its "
        "document backend) and embedding one full-length batch. *fresh*: empty data "
        "dir, every chunk embedded by the bundled model; *full*: `--full` on that index "
        "in a new process (every stage redoes every document, every vector reused); "
        "*standin*: empty data dir, the Ollama provider against the test suite's Ollama "
        "stand-in, so the whole vault fits in minutes (everything but the model is the "
        "real pipeline). Stage columns: the highest RSS while that stage ran, above the "
        "baseline; freed memory mostly stays with the process, so each includes what "
        "earlier stages left, and the stage that raises it is the one that needed it. "
        "Wall times come from 2 cores shared with other people's jobs (load average 2 to "
        "10 during these runs): compare them only loosely."
    ]
    for label, run in runs.items():
        rows = run["rows"]
        revisions = sorted({r.get("revision", run.get("revision", "?")) for r in rows})
        note = f" {run['note']}" if run.get("note") else ""
        parts.append(
            f"**{label}**: revision {', '.join(revisions)}, {run['date']}, nested slices "
            f"of {run['vault_name']} (seed {run['seed']}).{note}"
        )
        stages = [s for s in STAGE_ORDER if any(s in r["stage_peak_rss_mib"] for r in rows)]
        head = ["mode", "notes", "chunks", "wall s", "baseline MiB", "peak MiB",
                "above baseline MiB", "MiB / 1k chunks", *stages]  # fmt: skip
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in sorted(rows, key=lambda r: (MODES.index(r["mode"]), r["notes"])):
            per_k = r["above_baseline_mib"] / (r["chunks"] / 1000) if r["chunks"] else 0.0
            cells = [r["mode"], r["notes"], r["chunks"], r["wall_s"], r["baseline_rss_mib"],
                     r["peak_rss_mib"], r["above_baseline_mib"], f"{per_k:.1f}"]  # fmt: skip
            for s in stages:
                value = r["stage_peak_rss_mib"].get(s)
                cells.append("–" if value is None else f"{value - r['baseline_rss_mib']:.0f}")
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        for mode in MODES:
            summary = summarise(rows).get(mode, {})
            if summary.get("slope_mib_per_1000_chunks") is None:
                continue
            stage_slopes = summary["stage_slope_mib_per_1000_chunks"]
            lines.append("")
            lines.append(
                f"*{mode}*: peak above baseline grows by **{summary['slope_mib_per_1000_chunks']}"
                " MiB per 1,000 chunks** (least-squares slope over the sizes); per stage: "
                + ", ".join(f"{k} {v}" for k, v in stage_slopes.items())
                + "."
            )
        parts.append("\n".join(lines))
    if "before" in runs and "after" in runs:
        before, after = runs["before"], runs["after"]
        lines = [
            "**before → after**: peak RSS above baseline, MiB (wall time, s)",
            "",
            "| mode | notes | chunks | before | after |",
            "|---|---|---|---|---|",
        ]
        for mode in MODES:
            notes = {r["notes"] for r in before["rows"] if r["mode"] == mode}
            notes &= {r["notes"] for r in after["rows"] if r["mode"] == mode}
            for n in sorted(notes):
                b, a = _row(before["rows"], mode, n), _row(after["rows"], mode, n)
                assert a is not None and b is not None
                lines.append(
                    f"| {mode} | {n} | {a['chunks']} | {b['above_baseline_mib']} "
                    f"({b['wall_s']}) | {a['above_baseline_mib']} ({a['wall_s']}) |"
                )
            slopes = [summarise(run["rows"]).get(mode, {}).get("slope_mib_per_1000_chunks")
                      for run in (before, after)]  # fmt: skip
            if notes:
                lines.append(
                    f"| {mode} | slope, MiB per 1,000 chunks | | {slopes[0]} | {slopes[1]} |"
                )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _measure(
    work: Path, slices: dict[int, Path], sizes: list[int], modes: tuple[str, ...], host: str
) -> list[dict[str, Any]]:
    """Run one child process per size and mode (modes in order on one data dir)."""
    rows = []
    revision = git_revision()
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1],
    ).stdout.strip()  # fmt: skip
    if changed:
        revision += " with uncommitted changes"
    for size in sizes:
        data_dir = work / f"run-{size}" / "data"
        data_dir.parent.mkdir(parents=True)
        for mode in modes:
            out = work / f"run-{size}-{mode}.json"
            command = [sys.executable, __file__, "--child", str(slices[size]), str(data_dir),
                       str(out), mode, host]  # fmt: skip
            subprocess.run(command, check=True)
            row = json.loads(out.read_text())
            row["revision"] = revision
            rows.append(row)
            print(json.dumps(row), flush=True)
        shutil.rmtree(data_dir.parent, ignore_errors=True)
    return rows


def _sizes(text: str) -> list[int]:
    return sorted(int(s) for s in text.split(",") if s.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vault", type=Path, default=SHARED_DATA / "corpora" / "obsidian-hub")
    parser.add_argument("--sizes", default="150,300,600,1200", help="notes (real model)")
    parser.add_argument(
        "--standin-sizes", default="1600,3200,6571", help="notes (Ollama stand-in); '' skips"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--label", default="current", help="e.g. before / after")
    parser.add_argument("--no-full", action="store_true", help="skip the --full reruns")
    parser.add_argument("--no-save", action="store_true", help="print only")
    parser.add_argument(
        "--render", action="store_true", help="rewrite the doc section from the saved JSON"
    )
    parser.add_argument("--child", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        vault, data_dir, out, mode, *host = args.child
        child(Path(vault), Path(data_dir), Path(out), mode, *host)
        return

    if args.render:
        saved = json.loads((RESULTS / f"{NAME}.json").read_text())
        runs = saved["runs"]
        save(NAME, {"runs": runs}, render(runs), saved["command"])
        return
    sizes, standin_sizes = _sizes(args.sizes), _sizes(args.standin_sizes)
    work = Path(tempfile.mkdtemp(prefix="ragline-mem-"))
    rows = []
    try:
        slices = make_slices(args.vault, sorted(set(sizes) | set(standin_sizes)), work, args.seed)
        modes = ("fresh",) if args.no_full else ("fresh", "full")
        rows += _measure(work, slices, sizes, modes, "")
        if standin_sizes:
            from tests.ollama_standin import OllamaStandIn

            with OllamaStandIn() as standin:
                rows += _measure(work, slices, standin_sizes, ("standin",), standin.host)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    measured = {r["mode"] for r in rows}
    previous = RESULTS / f"{NAME}.json"
    runs = json.loads(previous.read_text()).get("runs", {}) if previous.exists() else {}
    kept = [r for r in runs.get(args.label, {}).get("rows", []) if r["mode"] not in measured]
    rows = kept + rows  # modes not measured this time stay as they were
    run = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "vault_name": args.vault.name,
        "seed": args.seed,
        "rows": rows,
        "summary": summarise(rows),
    }
    print(json.dumps(run["summary"]))
    if args.no_save:
        return
    runs[args.label] = run
    command = (
        f"python benchmarks/indexing_memory.py --sizes {args.sizes} "
        f"--standin-sizes {args.standin_sizes} --label LABEL"
    )
    save(NAME, {"runs": runs}, render(runs), command)


if __name__ == "__main__":
    main()
