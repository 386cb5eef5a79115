"""Hostile inputs (issue 26): each bomb indexed in a fresh process, its peak memory
and wall time against a baseline measured in the same run.

The bombs come from ``benchmarks/hostile/<area>.py`` (``CASES``): a 30,000 × 30,000
PNG of ~100 kB, zip bombs in EPUB/DOCX/PPTX/XLSX, 200,000 nested divs, a JSON Feed
nested 100,000 deep, stacked gzip, 20,000 messages sharing one Message-ID, a 40 MB
folded Subject, a committed node_modules/ of 100,000 files, a 5 MB one-line
heading… Each case is written beside a few good items into a folder of its own,
configured as one source with the default ``[limits]``, and indexed by
``ragline index`` (the Dagster job in process, LanceDB, Tantivy, the bundled model)
in a child process that records its own peak RSS (``getrusage``, its children —
Tesseract — included) and wall time. The child runs under an address-space limit
(``--memory-limit-gib``, 6 GiB) so that a regression fails here instead of taking
the machine down.

A case passes when the run succeeds, the hostile item is recorded as a problem (or
indexed within the caps, with a warning) with the expected words, the good items
are indexed, the peak stays ≤ 1 GiB and the wall time ≤ 60 s. The baseline is the
same child indexing a two-note Markdown source (imports, model load, one run): the
ratios say what the bomb costs above an ordinary small run.

    python benchmarks/hostile_inputs.py [--only NAME-SUBSTRING] [--no-save]

``--only`` measures the matching cases again and saves them into the rows of the
last whole run (benchmarks/results/hostile_inputs.json).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.hostile import HostileCase  # noqa: E402
from tests.feed_server import FeedServer  # noqa: E402

AREAS = ("documents", "mail", "feeds", "pipeline")
PEAK_LIMIT_MB = 1024
WALL_LIMIT_S = 60.0
CHILD_TIMEOUT_S = 600


def load_cases() -> list[HostileCase]:
    cases: list[HostileCase] = []
    for area in AREAS:
        try:
            module = importlib.import_module(f"benchmarks.hostile.{area}")
        except ModuleNotFoundError:
            print(f"(no benchmarks/hostile/{area}.py)")
            continue
        cases.extend(module.CASES)
    return cases


def write_config(folder: Path, source: dict[str, Any], models: Path | None = None) -> Path:
    """A config indexing ``source`` into ``folder/data``; ``models``: an ONNX export of
    the embedder made by an earlier run, copied in (the export, made once per index
    with PyTorch, would otherwise be measured in every case)."""
    import tomli_w

    folder.mkdir(parents=True, exist_ok=True)
    if models is not None and models.is_dir():
        shutil.copytree(models, folder / "data" / "models")
    config = folder / "ragline.toml"
    payload = {"data_dir": str(folder / "data"), "sources": [{"name": "hostile", **source}]}
    config.write_bytes(tomli_w.dumps(payload).encode())
    return config


def child(config: str) -> None:
    """Index every source of ``config`` in this process; print one JSON line."""
    started = time.perf_counter()
    from rag_serving.config import parse_config_file
    from rag_serving.status import index_status
    from ragline.indexing import index_sources

    parsed = parse_config_file(Path(config))
    outcomes = index_sources(parsed, [], full=False)
    wall = time.perf_counter() - started
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    status = index_status(parsed, check_pending=False).sources[0]
    problems = [
        {"path": i.path, "severity": i.severity, "message": i.message} for i in status.issues
    ]
    print(
        json.dumps(
            {
                "wall_s": wall,
                "peak_mb": max(own, children) / 1024,
                "success": all(o.success for o in outcomes),
                "error": next((o.error for o in outcomes if not o.success), None),
                "documents": status.documents,
                "chunks": status.chunks,
                "problems": problems,
            }
        )
    )


def run_child(config: Path, memory_limit_gib: float) -> dict[str, Any]:
    """``child`` in a fresh process under an address-space limit."""
    limit = int(memory_limit_gib * 2**30)

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(config)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            preexec_fn=limit_memory,
            cwd=REPO,
            env={**os.environ, "DAGSTER_HOME": ""},
        )
    except subprocess.TimeoutExpired:
        return {"success": False, "error": f"killed after {CHILD_TIMEOUT_S} s", "wall_s": None}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {
            "success": False,
            "error": f"exit {done.returncode}: {' | '.join(tail)}",
            "wall_s": time.perf_counter() - started,
        }
    return json.loads(lines[-1])


def baseline(folder: Path, memory_limit_gib: float) -> tuple[dict[str, Any], Path]:
    """A two-note Markdown source indexed from empty (with the embedder's export made
    by a first run), and the export's folder."""
    notes = folder / "notes"
    notes.mkdir(parents=True)
    (notes / "One.md").write_text("# One\n\nGlaciers move slowly downhill.\n")
    (notes / "Two.md").write_text("# Two\n\nA sourdough starter needs flour and water.\n")
    source = {"kind": "markdown", "path": str(notes)}
    run_child(write_config(folder / "first", source), memory_limit_gib)
    models = folder / "first" / "data" / "models"
    return run_child(write_config(folder / "second", source, models), memory_limit_gib), models


TWIN_FACTOR = 1.25


def judge(
    case: HostileCase, result: dict[str, Any], twin: dict[str, Any] | None = None
) -> tuple[bool, str]:
    """Whether the case holds, and the problem recorded for its hostile item."""
    words = case.expect.lower()
    problems = result.get("problems", [])
    recorded = next((p for p in problems if words and words in p["message"].lower()), None)
    if recorded is not None:
        shown = f"{recorded['severity']}: {recorded['message']}"
    else:
        shown = "(indexed within the caps)" if not words else "(nothing recorded)"
    held = bool(
        result.get("success")
        and (recorded is not None or not words)
        and result.get("documents", 0) >= case.good_items
        and (result.get("peak_mb") or 1e9) <= PEAK_LIMIT_MB
        and (result.get("wall_s") or 1e9) <= wall_limit(twin)
    )
    return held, shown


def wall_limit(twin: dict[str, Any] | None) -> float:
    """60 s, or for a content-bound case 1.25 × its twin's time when that is more."""
    if twin is None or not twin.get("wall_s"):
        return WALL_LIMIT_S
    return max(WALL_LIMIT_S, TWIN_FACTOR * twin["wall_s"])


def markdown(rows: list[dict[str, Any]], base: dict[str, Any], note: str = "") -> str:
    lines = [
        *([note, ""] if note else []),
        f"Baseline (a two-note Markdown source, same child process): peak "
        f"{base.get('peak_mb', 0):.0f} MB, {base.get('wall_s', 0):.1f} s. Limits: peak ≤ "
        f"{PEAK_LIMIT_MB} MB and ≤ {WALL_LIMIT_S:.0f} s per input (for big content, ≤ "
        f"{TWIN_FACTOR} × the same input without its hostile feature: its twin), the source "
        "never failing.",
        "",
        "| item | input | peak MB | × base | wall s | × base | twin s | docs | recorded | holds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        result, twin = row["result"], row.get("twin")
        peak, wall = result.get("peak_mb"), result.get("wall_s")
        recorded = (
            row["recorded"] if result.get("success") else f"run failed: {result.get('error')}"
        )
        recorded = recorded.replace("|", "\\|")
        recorded = recorded if len(recorded) <= 140 else recorded[:139] + "…"
        twin_s = "–"
        if twin and twin.get("wall_s"):
            twin_s = (
                f"{twin['wall_s']:.1f} ({twin.get('chunks')} chunks; this input "
                f"{result.get('chunks')})"
            )
        lines.append(
            f"| {row['item']} | {row['name']} | {peak or 0:.0f} | "
            f"{(peak or 0) / max(base.get('peak_mb') or 1, 1):.2f} | {wall or 0:.1f} | "
            f"{(wall or 0) / max(base.get('wall_s') or 1, 0.1):.2f} | {twin_s} | "
            f"{result.get('documents', '–')} | {recorded} | {'yes' if row['held'] else '**no**'} |"
        )
    held = sum(row["held"] for row in rows)
    lines += ["", f"{held} of {len(rows)} inputs hold."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument(
        "--only", help="run the cases whose name contains this (saved into the last whole run)"
    )
    parser.add_argument("--memory-limit-gib", type=float, default=6.0)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    cases = [c for c in load_cases() if not args.only or args.only.lower() in c.name.lower()]
    server = FeedServer().__enter__()  # serves the feeds' bombs, raw answers too
    work = Path(tempfile.mkdtemp(prefix="ragline-hostile-"))
    try:
        base, models = baseline(work / "baseline", args.memory_limit_gib)
        print(f"baseline: {base.get('peak_mb', 0):.0f} MB, {base.get('wall_s', 0):.1f} s")
        rows = []
        for number, case in enumerate(cases):
            folder = work / f"case-{number:02}"
            (folder / "input").mkdir(parents=True)
            source = case.build(folder / "input", server)
            result = run_child(write_config(folder, source, models), args.memory_limit_gib)
            twin = None
            if case.twin is not None:
                (folder / "twin" / "input").mkdir(parents=True)
                twin_source = case.twin(folder / "twin" / "input", server)
                twin = run_child(
                    write_config(folder / "twin", twin_source, models), args.memory_limit_gib
                )
                twin.pop("problems", None)
            held, recorded = judge(case, result, twin)
            rows.append(
                {
                    "name": case.name,
                    "item": case.item,
                    "result": result,
                    "held": held,
                    "recorded": recorded,
                    "twin": twin,
                }
            )
            print(
                f"{'ok  ' if held else 'FAIL'} item {case.item:>2} {case.name}: "
                f"{result.get('peak_mb') or 0:.0f} MB, {result.get('wall_s') or 0:.1f} s, "
                f"{result.get('documents')} docs; {recorded if result.get('success') else result.get('error')}"
            )
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        server.__exit__()
        shutil.rmtree(work, ignore_errors=True)
    if not args.no_save:
        from benchmarks.report import RESULTS, save

        for row in rows:
            row["result"].pop("problems", None)
        command = "python benchmarks/hostile_inputs.py"
        note = ""
        saved = RESULTS / "hostile_inputs.json"
        if args.only and saved.exists():
            # Measured again: these rows replace theirs in the last whole run, whose
            # other rows (and baseline) are kept.
            earlier = json.loads(saved.read_text())
            fresh = {row["name"]: row for row in rows}
            rows = [fresh.pop(r["name"], r) for r in earlier["cases"]] + list(fresh.values())
            base = earlier["baseline"]
            note = (
                f"Rows matching {args.only!r} measured again at this revision; the others and "
                f"the baseline come from the whole run of {earlier['date']} "
                f"(revision {earlier['revision']})."
            )
        data = {"baseline": base, "cases": rows, "note": note}
        save("hostile_inputs", data, markdown(rows, base, note), command)
    if not all(row["held"] for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
