"""Memory peak and time for two edge-case vaults, each against a baseline measured
in the same run (the machine is shared and noisy, so ratios are what to compare).

1. **Many tiny files**: the Obsidian Hub's notes split into paragraphs (frontmatter
   dropped, duplicates and paragraphs of fewer than 5 words or over 1,000 characters
   left out, seeded shuffle), one paragraph per file, 200 files per folder in nested
   folders. Each measurement runs in a fresh process:

   - ``fresh``: index from empty through the normal pipeline
     (``ragline.indexing.index_sources``: the Dagster job in process, LanceDB,
     Tantivy); wall time split per stage (the stage functions are wrapped) and the
     time inside the embedder itself;
   - ``bare``: the same process work without the pipeline: import, load the
     embedder, embed the very texts the pipeline embedded (read back from its
     index) in one call. Baseline for time (pipeline / bare) and memory;
   - ``no-change``: a second run on the same vault and index, nothing changed (what
     one change-sensor run costs), from a process that has only imported the
     pipeline;
   - ``walk``: ``os.walk`` + ``stat`` of every file of the vault in a fresh process
     (median of 3): the least work a no-change run can do.

   With the bundled MiniLM model on 2 shared cores, 20,000 files would take far
   longer than the run may take, so the real model indexes the first
   ``--real-files`` files and all ``--files`` are indexed with the Ollama provider
   pointed at the test suite's **Ollama stand-in** (tests/ollama_standin.py, served
   by this parent process: hashed bag-of-words vectors, 384 dimensions). Everything
   but the model is then the real pipeline; its bare baseline embeds the same texts
   through the same Ollama client and stand-in.

2. **One 20 MB note**: hub notes (frontmatter dropped), each under a ``#`` heading
   naming it, concatenated into one Markdown file until it reaches ``--note-mib``
   MiB; the hub has ~15 MB of Markdown, so the notes come round again, their
   headings marked ``(2)``. Plus a few normal hub notes. Indexed from empty with
   the Ollama stand-in (the real model would need hours for ~40k chunks on 2
   cores); RSS per stage against the baseline: the same process after imports and
   the embedder's first call, before indexing.

Inside each indexing process a thread samples RSS every 50 ms, tagged with the
stage running, and ``getrusage`` gives the exact peak (as in indexing_memory.py).

    python benchmarks/edge_vaults.py [--files 20000] [--real-files 2000]
        [--note-mib 20] [--quick] [--no-save] [--only big-note]

``--only big-note`` measures the one-note case (and its split baseline) again and
saves it with the many-tiny-files rows kept from benchmarks/results/edge_vaults.json.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.indexing_memory import Sampler as MemorySampler
from benchmarks.indexing_memory import _maxrss_bytes, _mib
from benchmarks.report import REPO, RESULTS, SHARED_DATA, git_revision, save

NAME = "edge_vaults"
COMMAND = "python benchmarks/edge_vaults.py"
HUB = SHARED_DATA / "corpora" / "obsidian-hub"
# Functions the indexing assets call (looked up in their modules at call time) → the
# tag their time and memory go to; the rest of a run is Dagster's ("dagster").
STAGES = {
    "scan_source": "scan",
    "parse_source": "parse",
    "chunk_source": "chunk",
    "embed_source": "embed",
    "ensure_search_indexes": "ann",
    "sync_fulltext": "fulltext",
    "upgrade_index": "upgrade",
    "wait_for_writer_turn": "writer turn",
    "materialize_result": "metadata",
}
CHECKS = ["items_indexed", "chunks_have_documents", "vectors_have_recorded_dimension",
          "one_embedder_fingerprint", "tantivy_matches_lancedb"]  # fmt: skip
# Parts of the stages, "stage:part" (the stage's own tag then holds the rest of it).
PARTS = [
    ("rag_assets.stages.parse", "_parse_one", "parse:files"),
    ("rag_assets.stages.parse", "_write_documents", "parse:write"),
    ("rag_sources.kinds.base", "SourceKind.chunk", "chunk:chunker"),
    ("rag_assets.stages.chunk", "_write", "chunk:write"),
    ("rag_assets.stages.embed", "_vectors_for", "embed:vectors"),
]
STAGE_ORDER = ["upgrade", "scan", "parse", "parse:files", "parse:write", "chunk",
               "chunk:chunker", "chunk:write", "embed", "embed:vectors", "ann", "fulltext",
               "checks", "writer turn", "metadata", "dagster"]  # fmt: skip
SAMPLE_S = 0.05
FILES_PER_FOLDER = 200
NORMAL_NOTES = 5
STANDIN_EMBEDDER = {"provider": "ollama", "model": "all-minilm", "max_tokens": 256,
                    "batch_size": 64}  # fmt: skip


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


class Sampler(MemorySampler):
    """indexing_memory's RSS sampler, plus the time spent per stage tag."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: dict[str, float] = {}


def _tagged(
    sampler: Sampler, stage: str, func: Callable[..., Any], light: bool = False
) -> Callable[..., Any]:
    """``func`` with the sampler's stage tag set while it runs and its time added to
    the stage (not to an enclosing one); a stage that raised the process's maxrss owns
    that exact peak. ``light``: no RSS sample on entry and exit (functions called once
    per file; the thread's samples and the maxrss check remain)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        outer = sampler.stage
        if not light:
            sampler.sample()
        sampler.stage = stage
        before = _maxrss_bytes()
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - started
            sampler.seconds[stage] = sampler.seconds.get(stage, 0.0) + elapsed
            if outer != "dagster":
                sampler.seconds[outer] = sampler.seconds.get(outer, 0.0) - elapsed
            if not light:
                sampler.sample()
            after = _maxrss_bytes()
            if after > before:
                sampler.peaks[stage] = max(sampler.peaks.get(stage, 0), after)
            sampler.stage = outer

    return wrapper


def _timed(totals: dict[str, float], func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with its time and calls added to ``totals`` (the embedder's own work)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            totals["seconds"] = totals.get("seconds", 0.0) + time.perf_counter() - started
            totals["calls"] = totals.get("calls", 0) + 1

    return wrapper


def _write_config(root: Path, vaults: dict[str, Path], host: str) -> Path:
    """A ragline.toml as tests/conftest.py writes it; the stand-in embedder if ``host``."""
    import tomli_w

    settings: dict[str, Any] = {
        "data_dir": str(root / "data"),
        "sources": [
            {"name": name, "kind": "markdown", "path": str(path)} for name, path in vaults.items()
        ],
    }
    if host:
        settings["embedder"] = {**STANDIN_EMBEDDER, "host": host}
    path = root / "ragline.toml"
    path.write_bytes(tomli_w.dumps(settings).encode())
    return path


def _child_env() -> None:
    os.environ.pop("DAGSTER_HOME", None)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# ---- child processes --------------------------------------------------------------


def child_index(config_path: Path, out: Path, mode: str, dump: str = "") -> None:
    """Index the config's sources in this process (``fresh`` or ``no-change``) and
    write the measurements to ``out``; ``dump``: write the embedded texts there."""
    _child_env()
    sampler = Sampler()
    sampler.start()
    started = time.perf_counter()
    from rag_assets import checks, resources
    from rag_assets.assets import indexing as assets
    from rag_serving.config import parse_config_file
    from rag_serving.index.manifest import read_manifest
    from rag_serving.index.store import IndexStore
    from ragline.indexing import index_sources

    config = parse_config_file(config_path)
    # The instance the pipeline's embedder resource gets (cached per process).
    embedder = resources._embedder(config.embedder.model_dump_json(), str(config.data_dir))
    IndexStore(config.data_dir)  # lancedb imported and connected
    if mode == "fresh":
        # Whatever the embedder loads before it can embed belongs to the baseline.
        embedder.embed_documents(["warm up"])
    baseline = _rss()
    baseline_maxrss = _maxrss_bytes()
    setup_s = time.perf_counter() - started

    model: dict[str, float] = {}
    embedder.embed_documents = _timed(model, embedder.embed_documents)  # type: ignore[method-assign]
    for func, stage in STAGES.items():
        if hasattr(assets, func):
            setattr(assets, func, _tagged(sampler, stage, getattr(assets, func)))
    for func in CHECKS:
        if hasattr(checks, func):
            setattr(checks, func, _tagged(sampler, "checks", getattr(checks, func)))
    for module, name, tag in PARTS:
        owner: Any = importlib.import_module(module)
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        if hasattr(owner, attr):  # the code moves on; a part that went is left out
            setattr(owner, attr, _tagged(sampler, tag, getattr(owner, attr), light=True))
    sampler.stage = "dagster"  # run set-up, asset checks, event log
    started = time.perf_counter()
    outcomes = index_sources(config, [], full=False)
    wall = time.perf_counter() - started
    sampler.stop()
    assert all(o.success for o in outcomes), [o.error for o in outcomes]

    store = IndexStore(config.data_dir)
    generation = read_manifest(store.layout.manifest_path).active
    peaks = {s: v for s, v in sampler.peaks.items() if s != "setup"}
    peak = max(peaks.values())
    if _maxrss_bytes() > baseline_maxrss:  # the exact peak happened while indexing
        peak = max(peak, _maxrss_bytes())
    seconds = {s: round(v, 2) for s, v in sampler.seconds.items()}
    seconds["dagster"] = round(wall - sum(sampler.seconds.values()), 2)
    # The texts the pipeline embedded, one per embed hash (vectors are reused by it).
    texts = store.read("staged_chunks", columns=["embed_hash", "embed_text"])
    unique = dict(
        zip(texts["embed_hash"].to_pylist(), texts["embed_text"].to_pylist(), strict=True)
    )
    if dump:
        Path(dump).write_text(json.dumps(list(unique.values())))
    problems = 0
    for outcome in outcomes:
        meta = outcome.metadata.get("parsed_documents", {})
        problems += int(meta.get("failed", 0) or 0) + int(meta.get("skipped", 0) or 0)
    embedded = sum(int(o.metadata.get("embeddings", {}).get("embedded", 0) or 0) for o in outcomes)
    result = {
        "mode": mode,
        "files": sum(store.count("files", f"source = '{o.source}'") for o in outcomes),
        "documents": store.count("documents"),
        "chunks": store.count(generation.table),
        "unique_texts": len(unique),
        "embedded": embedded,
        "problems": problems,
        "wall_s": round(wall, 2),
        "setup_s": round(setup_s, 2),
        "stage_s": seconds,
        "model_s": round(model.get("seconds", 0.0), 2),
        "model_calls": int(model.get("calls", 0)),
        "baseline_rss_mib": _mib(baseline),
        "peak_rss_mib": _mib(peak),
        "stage_peak_rss_mib": {k: _mib(v) for k, v in peaks.items()},
        "samples": sampler.samples,
    }
    out.write_text(json.dumps(result, indent=2))


def child_prepare(config_path: Path, out: Path) -> None:
    """What a fresh data dir does once before the first embedding (the bundled model's
    ONNX export), so that neither ``fresh`` nor ``bare`` pays it."""
    _child_env()
    started = time.perf_counter()
    from rag_assets import resources
    from rag_serving.config import parse_config_file

    config = parse_config_file(config_path)
    embedder = resources._embedder(config.embedder.model_dump_json(), str(config.data_dir))
    embedder.prepare_query_path()
    result = {"mode": "prepare", "wall_s": round(time.perf_counter() - started, 2)}
    out.write_text(json.dumps(result, indent=2))


def child_bare(config_path: Path, texts_path: Path, out: Path) -> None:
    """Import the pipeline, load the configured embedder, embed ``texts_path``'s texts."""
    _child_env()
    started = time.perf_counter()
    from rag_assets import resources
    from rag_serving.config import parse_config_file
    from rag_serving.index.store import IndexStore
    from ragline.indexing import index_sources  # noqa: F401  (the same imports)

    config = parse_config_file(config_path)
    embedder = resources._embedder(config.embedder.model_dump_json(), str(config.data_dir))
    IndexStore(config.data_dir)
    embedder.embed_documents(["warm up"])
    model_loaded = _rss()
    setup_s = time.perf_counter() - started
    texts = json.loads(texts_path.read_text())
    started = time.perf_counter()
    vectors = embedder.embed_documents(texts)
    embed_s = time.perf_counter() - started
    assert len(vectors) == len(texts)
    result = {
        "mode": "bare",
        "texts": len(texts),
        "setup_s": round(setup_s, 2),
        "wall_s": round(embed_s, 2),
        "baseline_rss_mib": _mib(model_loaded),
        "peak_rss_mib": _mib(max(_maxrss_bytes(), _rss())),
    }
    out.write_text(json.dumps(result, indent=2))


def child_walk(vault: Path, out: Path, repeats: int = 3) -> None:
    """``os.walk`` + ``stat`` of every file: the floor of a no-change run."""
    times, files = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        files = 0
        for folder, _dirs, names in os.walk(vault):
            for name in names:
                os.stat(os.path.join(folder, name))
                files += 1
        times.append(time.perf_counter() - started)
    result = {
        "mode": "walk",
        "files": files,
        "wall_s": round(statistics.median(times), 5),
        "walls_s": [round(t, 5) for t in times],
        "peak_rss_mib": _mib(_maxrss_bytes()),
    }
    out.write_text(json.dumps(result, indent=2))


# ---- the vaults -------------------------------------------------------------------


def _body(text: str) -> str:
    """A note's text without its YAML frontmatter."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            return text[end + 4 :].lstrip("\n")
    return text


def _hub_notes(hub: Path) -> list[Path]:
    return sorted(hub.rglob("*.md"))


def write_tiny_vault(hub: Path, root: Path, count: int, seed: int) -> list[Path]:
    """``count`` one-paragraph files under ``root``, 200 per folder; the files in order."""
    seen: set[str] = set()
    paragraphs: list[str] = []
    for note in _hub_notes(hub):
        for part in re.split(r"\n\s*\n", _body(note.read_text(errors="replace"))):
            part = part.strip()
            if len(part.split()) < 5 or len(part) > 1000 or part in seen:
                continue
            seen.add(part)
            paragraphs.append(part)
    if len(paragraphs) < count:
        raise SystemExit(f"{hub}: only {len(paragraphs)} paragraphs; ask for fewer --files")
    random.Random(seed).shuffle(paragraphs)
    files = []
    for i, text in enumerate(paragraphs[:count]):
        folder = root / f"part-{i // (FILES_PER_FOLDER * 10):02d}"
        folder = folder / f"group-{i // FILES_PER_FOLDER % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"paragraph-{i:05d}.md"
        path.write_text(text + "\n")
        files.append(path)
    return files


def copy_files(files: list[Path], src: Path, dst: Path) -> None:
    for path in files:
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def write_big_note_vaults(hub: Path, big: Path, split: Path, mib: float) -> dict[str, Any]:
    """``big``: one note of ``mib`` MiB of hub notes under ``#`` headings, plus a few
    normal notes; ``split``: the same text as one note per heading (the baseline)."""
    notes = _hub_notes(hub)
    target = int(mib * 2**20)
    parts: list[str] = []
    size, rounds = 0, 1
    while size < target:
        for note in notes:
            name = note.relative_to(hub).with_suffix("").as_posix()
            mark = f" ({rounds})" if rounds > 1 else ""
            part = f"# {name}{mark}\n\n{_body(note.read_text(errors='replace')).strip()}\n\n"
            parts.append(part)
            size += len(part.encode())
            if size >= target:
                break
        else:
            rounds += 1
    normal = notes[:: len(notes) // NORMAL_NOTES][:NORMAL_NOTES]
    for root in (big, split):
        (root / "notes").mkdir(parents=True)
        for note in normal:
            shutil.copy2(note, root / "notes" / note.name)
    note = big / "Obsidian Hub in one note.md"
    note.write_text("".join(parts))
    for i, part in enumerate(parts):
        folder = split / f"group-{i // FILES_PER_FOLDER:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"note-{i:05d}.md").write_text(part)
    return {"note_bytes": note.stat().st_size, "hub_notes_in_it": len(parts), "rounds": rounds,
            "normal_notes": len(normal)}  # fmt: skip


# ---- the parent -------------------------------------------------------------------


def _run_child(args: list[str], out: Path) -> dict[str, Any]:
    subprocess.run([sys.executable, __file__, "--child", *args, str(out)], check=True)
    row = json.loads(out.read_text())
    print(json.dumps(row), flush=True)
    return row


def measure_tiny(work: Path, vault: Path, label: str, host: str) -> dict[str, Any]:
    """fresh, bare, no-change and walk for one vault and embedder."""
    root = work / label
    root.mkdir()
    config = _write_config(root, {"tiny": vault}, host)
    texts = root / "texts.json"
    rows = {
        "prepare": _run_child(["prepare", str(config)], root / "prepare.json"),
        "fresh": _run_child(["index", str(config), "fresh", str(texts)], root / "fresh.json"),
        "bare": _run_child(["bare", str(config), str(texts)], root / "bare.json"),
        "no_change": _run_child(["index", str(config), "no-change"], root / "no-change.json"),
        "walk": _run_child(["walk", str(vault)], root / "walk.json"),
    }
    shutil.rmtree(root / "data", ignore_errors=True)
    return rows


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def _x(ratio: float | None) -> str:
    """A ratio as the tables show it."""
    if ratio is None:
        return "–"
    return f"{ratio:,.0f}×" if ratio >= 100 else f"{ratio}×"


def summarise_tiny(rows: dict[str, Any]) -> dict[str, Any]:
    fresh, bare, again, walk = rows["fresh"], rows["bare"], rows["no_change"], rows["walk"]
    return {
        "files": fresh["files"],
        "fresh_wall_s": fresh["wall_s"],
        "bare_embed_s": bare["wall_s"],
        "fresh_over_bare_time": _ratio(fresh["wall_s"], bare["wall_s"]),
        "fresh_ms_per_file": round(1000 * fresh["wall_s"] / max(fresh["files"], 1), 2),
        "fresh_peak_rss_mib": fresh["peak_rss_mib"],
        "bare_model_loaded_rss_mib": bare["baseline_rss_mib"],
        "bare_peak_rss_mib": bare["peak_rss_mib"],
        "fresh_peak_over_model_loaded": _ratio(fresh["peak_rss_mib"], bare["baseline_rss_mib"]),
        "fresh_peak_over_bare_peak": _ratio(fresh["peak_rss_mib"], bare["peak_rss_mib"]),
        "no_change_wall_s": again["wall_s"],
        "no_change_setup_s": again["setup_s"],
        "walk_s": walk["wall_s"],
        "no_change_over_walk_time": _ratio(again["wall_s"], walk["wall_s"]),
        "no_change_peak_rss_mib": again["peak_rss_mib"],
        "no_change_baseline_rss_mib": again["baseline_rss_mib"],
        "no_change_peak_over_baseline": _ratio(again["peak_rss_mib"], again["baseline_rss_mib"]),
    }


def summarise_big(rows: dict[str, Any], vault: dict[str, Any]) -> dict[str, Any]:
    big, split = rows["big"], rows["split"]
    note_mib = vault["note_bytes"] / 2**20
    above = big["peak_rss_mib"] - big["baseline_rss_mib"]
    split_above = split["peak_rss_mib"] - split["baseline_rss_mib"]
    return {
        "note_mib": round(note_mib, 1),
        "wall_s": big["wall_s"],
        "split_wall_s": split["wall_s"],
        "time_over_split": _ratio(big["wall_s"], split["wall_s"]),
        "chunks": big["chunks"],
        "peak_rss_mib": big["peak_rss_mib"],
        "baseline_rss_mib": big["baseline_rss_mib"],
        "peak_over_baseline": _ratio(big["peak_rss_mib"], big["baseline_rss_mib"]),
        "above_baseline_mib": round(above, 1),
        "above_baseline_over_note_size": _ratio(above, note_mib),
        "split_peak_rss_mib": split["peak_rss_mib"],
        "split_above_baseline_mib": round(split_above, 1),
        "above_baseline_over_split": _ratio(above, split_above),
    }


def _split(row: dict[str, Any]) -> str:
    """'scan 1.2 s (3%), …' from a row's per-stage seconds."""
    total = row["wall_s"] or 1.0
    parts = []
    for stage in STAGE_ORDER:
        seconds = row["stage_s"].get(stage)
        if seconds is not None and seconds >= 0.05:  # shorter ones: in the JSON
            parts.append(f"{stage} {seconds:.1f} s ({100 * seconds / total:.0f}%)")
    if row.get("model_s"):
        parts.append(f"of which inside the embedder {row['model_s']:.1f} s")
    return ", ".join(parts)


def _top(values: dict[str, float]) -> str:
    """The stage with the largest value (time or RSS)."""
    return max(values, key=lambda stage: values[stage])


def _stage_peaks(row: dict[str, Any]) -> str:
    base = row["baseline_rss_mib"]
    peaks = row["stage_peak_rss_mib"]
    return ", ".join(f"{s} +{peaks[s] - base:.0f}" for s in STAGE_ORDER if s in peaks)


def render(data: dict[str, Any]) -> str:
    tiny, big = data["tiny"], data["big_note"]
    export_s = max(run["rows"]["prepare"]["wall_s"] for run in tiny["runs"].values())
    parts = [
        f"Measured at {data['revision']} (run started {data['date']}, {data['total_s'] / 60:.0f} "
        "min in all). Two edge-case vaults, each against a baseline measured in the same "
        "run; every measurement in its own fresh process. "
        "Wall times come from 2 cores shared with other people's jobs (load average "
        f"{data['load_before']} before the run, {data['load_after']} after): read the "
        "ratios, not the seconds. *stand-in*: the Ollama provider against the test suite's "
        "Ollama stand-in (tests/ollama_standin.py, hashed bag-of-words vectors served by "
        "the benchmark's parent process) instead of a model; everything else is the real "
        "pipeline.",
        _kept(data)
        + f"**Many tiny files**: Obsidian Hub notes split into paragraphs, one per file "
        f"(median {tiny['median_file_bytes']} bytes), {FILES_PER_FOLDER} files per folder in "
        "nested folders. *fresh*: empty → indexed; *bare*: the same process work without "
        "the pipeline (load the embedder, embed the very texts the pipeline embedded, one "
        "call); *no change*: a second run on the same index, nothing changed (one change-"
        "sensor run), in a process that has only imported the pipeline; *walk*: `os.walk` + "
        "`stat` of the vault (median of 3). The bundled model's one-time ONNX export "
        "for a new data dir ran in a process of its own before *fresh* "
        f"({export_s} s)."
        " Stage split: time and RSS per function the indexing assets call; `stage:part` is "
        "a part of that stage (`parse:files` reading and parsing the files, `parse:write` "
        "writing documents, `chunk:chunker` the chunker, `chunk:write` writing chunks, "
        "`embed:vectors` reusing or computing vectors), the stage's own entry the rest of "
        "it; *dagster* is what is left of the run (run set-up, event log, step "
        "orchestration); *checks* the asset checks, *upgrade* the index format check, "
        "*writer turn* waiting for the writer pool, *metadata* the materialisation "
        "metadata. RSS per stage is the highest seen while it ran; freed memory "
        "mostly stays with the process, so each includes what earlier stages left.",
    ]
    head = ["embedder", "files", "fresh s", "bare s", "fresh / bare", "ms / file",
            "fresh peak MiB", "bare: model loaded / peak MiB", "fresh peak / model loaded", "fresh peak / bare peak",
            "no-change s", "walk ms", "no-change / walk", "no-change peak MiB (baseline)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, run in tiny["runs"].items():
        s = run["summary"]
        cells = [label, s["files"], s["fresh_wall_s"], s["bare_embed_s"],
                 _x(s["fresh_over_bare_time"]), s["fresh_ms_per_file"],
                 s["fresh_peak_rss_mib"],
                 f"{s['bare_model_loaded_rss_mib']} / {s['bare_peak_rss_mib']}",
                 _x(s["fresh_peak_over_model_loaded"]), _x(s["fresh_peak_over_bare_peak"]), s["no_change_wall_s"],
                 round(1000 * s["walk_s"], 1), _x(s["no_change_over_walk_time"]),
                 f"{s['no_change_peak_rss_mib']} ({s['no_change_baseline_rss_mib']})"]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    parts.append("\n".join(lines))
    notes = []
    for label, run in tiny["runs"].items():
        fresh, again = run["rows"]["fresh"], run["rows"]["no_change"]
        notes.append(
            f"- *{label}*, fresh: {_split(fresh)}. RSS above its own model-loaded baseline "
            f"per stage, MiB: {_stage_peaks(fresh)}.\n"
            f"- *{label}*, no change: {_split(again)}; process start and imports "
            f"{again['setup_s']} s more. RSS above the imports-only baseline, MiB: "
            f"{_stage_peaks(again)}."
        )
    parts.append("\n".join(notes))
    s, vault = big["summary"], big["vault"]
    head = ["vault", "files", "chunks (distinct texts)", "wall s", "time / split",
            "baseline MiB", "peak MiB", "peak / baseline", "above baseline MiB",
            "above baseline / split's", "above baseline / note size"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, row in [("one note", big["rows"]["big"]), ("split", big["rows"]["split"])]:
        above = row["peak_rss_mib"] - row["baseline_rss_mib"]
        mine = label == "one note"
        cells = [label, row["files"], f"{row['chunks']} ({row['unique_texts']})", row["wall_s"],
                 f"{s['time_over_split']}×" if mine else "1×", row["baseline_rss_mib"],
                 row["peak_rss_mib"], f"{_ratio(row['peak_rss_mib'], row['baseline_rss_mib'])}×",
                 f"{above:.0f}", f"{s['above_baseline_over_split']}×" if mine else "1×",
                 f"{s['above_baseline_over_note_size']}×" if mine else "–"]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    notes = [
        f"- *{label}*: {_split(row)}. RSS above the baseline per stage, MiB: "
        f"{_stage_peaks(row)}. Most time: {_top(row['stage_s'])}; highest RSS: "
        f"{_top(row['stage_peak_rss_mib'])}."
        for label, row in [("one note", big["rows"]["big"]), ("split", big["rows"]["split"])]
    ]
    parts.append(
        f"**One {s['note_mib']} MiB note**: {vault['hub_notes_in_it']} hub notes (frontmatter "
        "dropped), each under a `#` heading naming it, in one Markdown file (the hub holds "
        f"~15 MB of Markdown, so the notes come round {vault['rounds']} times, headings "
        f"marked `(2)`), plus {vault['normal_notes']} normal notes; empty → indexed with the "
        "stand-in. *split*, the baseline: the same text as one note per heading, indexed "
        "the same way. Baseline RSS: each process after imports and the embedder's first "
        "call, before indexing.\n\n" + "\n".join(lines) + "\n\n" + "\n".join(notes)
    )
    return "\n\n".join(parts)


def _kept(data: dict[str, Any]) -> str:
    """Where the many-tiny-files rows come from when ``--only big-note`` kept them."""
    kept = data.get("tiny_kept_from")
    if not kept:
        return ""
    return (
        f"*The many-tiny-files rows below were measured at {kept['revision']} "
        f"({kept['date']}) and kept: this run (`--only big-note`) measured the one-note "
        "case and its split baseline only.* "
    )


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hub", type=Path, default=HUB)
    parser.add_argument("--files", type=int, default=20000, help="tiny files (stand-in)")
    parser.add_argument("--real-files", type=int, default=2000, help="tiny files (MiniLM)")
    parser.add_argument("--note-mib", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--quick", action="store_true", help="small sizes, print only")
    parser.add_argument("--skip", choices=["tiny", "big"], help="leave one case out")
    parser.add_argument("--no-save", action="store_true", help="print only")
    parser.add_argument(
        "--only", choices=["big-note"],
        help="measure only this case; the other's rows are kept from the saved results",
    )  # fmt: skip
    parser.add_argument("--render", type=Path, metavar="FILE", help="save from a kept run")
    parser.add_argument("--child", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "prepare":
            config, out = rest
            child_prepare(Path(config), Path(out))
        elif kind == "index":
            config, mode, *dump, out = rest
            child_index(Path(config), Path(out), mode, *dump)
        elif kind == "bare":
            config, texts, out = rest
            child_bare(Path(config), Path(texts), Path(out))
        else:
            vault, out = rest
            child_walk(Path(vault), Path(out))
        return
    if args.render:
        kept = json.loads(args.render.read_text())
        save(NAME, kept, render(kept), COMMAND)
        return
    if args.quick:
        args.files, args.real_files, args.note_mib, args.no_save = 2000, 200, 2.0, True
    kept_tiny: dict[str, Any] | None = None
    if args.only == "big-note":
        args.skip = "tiny"
        saved = json.loads((RESULTS / f"{NAME}.json").read_text())
        kept_tiny = saved["tiny"]
        # Rows an earlier --only run kept name the run that measured them.
        kept_from = saved.get("tiny_kept_from") or {
            "revision": saved["revision"],
            "date": saved["date"],
        }

    from tests.ollama_standin import OllamaStandIn

    started = time.perf_counter()
    data: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "revision": git_revision(),
        "load_before": _load(),
        "sizes": {"files": args.files, "real_files": args.real_files, "note_mib": args.note_mib},
    }
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, cwd=REPO,
    ).stdout.strip()  # fmt: skip
    if changed:
        data["revision"] += " with uncommitted changes"
    work = Path(tempfile.mkdtemp(prefix="ragline-edge-"))
    try:
        with OllamaStandIn() as standin:
            standin.record = lambda request: None  # type: ignore[method-assign]  # 40k bodies
            if args.skip != "tiny":
                vault = work / "tiny-vault"
                files = write_tiny_vault(args.hub, vault, args.files, args.seed)
                sizes = sorted(p.stat().st_size for p in files)
                real = work / "tiny-vault-real"
                copy_files(files[: args.real_files], vault, real)
                runs = {}
                for label, path, host in [
                    ("MiniLM (bundled)", real, ""),
                    ("stand-in", vault, standin.host),
                ]:
                    rows = measure_tiny(work, path, f"tiny-{len(runs)}", host)
                    runs[label] = {"rows": rows, "summary": summarise_tiny(rows)}
                data["tiny"] = {"median_file_bytes": sizes[len(sizes) // 2], "runs": runs}
            if args.skip != "big":
                big, split = work / "big-vault", work / "split-vault"
                vault_info = write_big_note_vaults(args.hub, big, split, args.note_mib)
                rows = {}
                for label, vault in [("split", split), ("big", big)]:
                    root = work / label
                    root.mkdir()
                    config = _write_config(root, {label: vault}, standin.host)
                    rows[label] = _run_child(["index", str(config), "fresh"], root / "fresh.json")
                    shutil.rmtree(root / "data", ignore_errors=True)
                data["big_note"] = {
                    "vault": vault_info,
                    "rows": rows,
                    "summary": summarise_big(rows, vault_info),
                }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    data["load_after"] = _load()
    data["total_s"] = round(time.perf_counter() - started, 1)
    if kept_tiny is not None:
        data["tiny"], data["tiny_kept_from"] = kept_tiny, kept_from
        args.skip = None
    kept = Path(tempfile.gettempdir()) / f"{NAME}-data.json"
    kept.write_text(json.dumps(data, indent=2))  # --render FILE writes the doc from it
    print(f"measurements kept in {kept}")
    print(json.dumps({k: v for k, v in data.items() if k not in ("tiny", "big_note")}))
    if args.no_save or args.skip:
        if not args.skip:
            print(render(data))
        return
    save(NAME, data, render(data), COMMAND)


if __name__ == "__main__":
    main()
