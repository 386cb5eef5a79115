"""Where one `ragline watch` run spends its time: edit one note of an indexed vault,
then do what the watcher does for that event (record the change signal, run
`index_source` in this process with the changed path), and print the time of each
step from the run's Dagster event log. Compared with a run without the changed path
(a full reconcile, what the sensor and `ragline index` do), in the same process.

The note is put back as it was at the end (and indexed again).

    python benchmarks/watch_run_profile.py --config /tmp/ragline-bench/hub.toml --rounds 3
    python benchmarks/watch_run_profile.py --config SMALL.toml --make-small 300 \
        --from-vault /tmp/ragline-bench/hub-vault    # builds SMALL's index first
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STEPS = ("raw_files", "parsed_documents", "chunks", "embeddings", "fulltext_index")


def step_seconds(instance, run_id: str) -> dict[str, float]:
    """Seconds per step (start → success) and the run's own overhead."""
    starts: dict[str, float] = {}
    seconds: dict[str, float] = {}
    first = last = None
    for entry in instance.all_logs(run_id):
        first = entry.timestamp if first is None else first
        last = entry.timestamp
        event = entry.dagster_event
        if event is None or event.step_key is None:
            continue
        if event.event_type_value == "STEP_START":
            starts[event.step_key] = entry.timestamp
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE"):
            seconds[event.step_key] = entry.timestamp - starts.get(event.step_key, entry.timestamp)
    if first is not None and last is not None:
        seconds["run (event log span)"] = last - first
    return seconds


def small_vault(source: Path, target: Path, notes: int, config: Path) -> None:
    """Copy ``notes`` notes (spread over ``source``) to ``target`` and index them."""
    from benchmarks.freshness import write_config
    from rag_serving.config import parse_config_file
    from ragline.indexing import index_sources

    picked = sorted(p for p in source.rglob("*.md") if ".obsidian" not in p.parts)
    picked = picked[:: max(1, len(picked) // notes)][:notes]
    for path in picked:
        copy = target / path.relative_to(source)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
    write_config(config, config.with_suffix(""), target)
    [outcome] = index_sources(parse_config_file(config), [], full=False)
    assert outcome.success, outcome.error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--make-small", type=int, default=0, help="build a vault of N notes")
    parser.add_argument("--from-vault", type=Path, help="where --make-small copies notes from")
    args = parser.parse_args()
    if args.make_small and not args.config.exists():
        small_vault(
            args.from_vault, args.config.with_suffix(".vault"), args.make_small, args.config
        )

    from rag_serving.config import parse_config_file
    from ragline.watching import SourceWatcher

    config = parse_config_file(args.config)
    watcher = SourceWatcher(config)
    [source] = watcher.sources
    root = source.roots[0]
    notes = sorted(p for p in root.rglob("*.md") if ".obsidian" not in p.parts)
    note = notes[len(notes) // 2]
    original = note.read_bytes()
    stat = note.stat()
    print(f"{len(notes)} notes; editing {note.relative_to(root)}")
    rows: dict[str, dict[str, list[float]]] = {"watch": {}, "full": {}}
    try:
        for _ in range(args.rounds):
            for mode in ("watch", "full"):
                note.write_bytes(
                    original + f"\n\nProfile probe zq{uuid.uuid4().hex[:10]}.\n".encode()
                )
                started = time.perf_counter()
                if mode == "watch":
                    run = watcher.index(source.name, [str(note)], started)
                    outcome = run.outcome
                else:
                    outcome = watcher.indexer.run(source.name)
                total = time.perf_counter() - started
                assert outcome.success, outcome.error
                split = step_seconds(watcher.indexer.instance, outcome.run_id)
                split["signal + run (wall)"] = total
                for key, value in split.items():
                    rows[mode].setdefault(key, []).append(value)
    finally:
        note.write_bytes(original)
        import os

        os.utime(note, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        watcher.indexer.run(source.name)
    print(f"{'step':28} {'watch run (median s)':>22} {'full run (median s)':>22}")
    for key in [*STEPS, "run (event log span)", "signal + run (wall)"]:
        w, f = rows["watch"].get(key), rows["full"].get(key)
        cells = [f"{statistics.median(v):22.3f}" if v else f"{'-':>22}" for v in (w, f)]
        print(f"{key:28} {cells[0]} {cells[1]}")


if __name__ == "__main__":
    main()
