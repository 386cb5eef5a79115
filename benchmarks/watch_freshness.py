"""Save → searchable on a real vault: `ragline watch` against the sensor path of
`ragline ui` (default 30 s interval), measured in the same run on the same index.

Each round edits a note (saved as Obsidian and vim save: a temporary file renamed
over it), creates a note, renames it and deletes it; the clock runs from the file
operation until a search in another process shows the change (for a delete: no
longer shows it).

    python benchmarks/watch_freshness.py --vault /tmp/ragline-bench/hub-vault --data-dir /tmp/ragline-bench/hub
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.freshness import save_to_searchable_setup, wait_until_settled, write_config
from benchmarks.report import save

OPERATIONS = ("edit", "create", "rename", "delete")
TIMEOUT_S = 300


def _start(command: list[str], log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("DAGSTER_HOME", None)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "ragline.cli", *command],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip


def _stop(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _wait(check: Callable[[], bool], what: str) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < TIMEOUT_S:
        if check():
            return time.perf_counter() - started
        time.sleep(0.05)
    raise SystemExit(f"{what} not searchable after {TIMEOUT_S} s")


def _save_by_rename(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def one_round(engine, vault: Path, note: Path) -> dict[str, float]:
    """Seconds from each operation to the search showing it."""

    def paths_with(token: str) -> list[str]:
        engine_hits = engine.search(token, k=3, mode="bm25").hits
        return [h.path for h in engine_hits if token in h.snippet.replace("**", "")]

    times: dict[str, float] = {}
    token = "zq" + uuid.uuid4().hex[:10]
    _save_by_rename(note, note.read_text(encoding="utf-8") + f"\n\nFreshness probe {token}.\n")
    times["edit"] = _wait(lambda: bool(paths_with(token)), "an edit")
    token = "zq" + uuid.uuid4().hex[:10]
    created = vault / f"Probe {token}.md"
    created.write_text(f"# Probe\n\nA new note about {token}.\n", encoding="utf-8")
    times["create"] = _wait(lambda: bool(paths_with(token)), "a new note")
    renamed = vault / f"Renamed {token}.md"
    created.rename(renamed)
    times["rename"] = _wait(lambda: paths_with(token) == [renamed.name], "a rename")
    renamed.unlink()
    times["delete"] = _wait(lambda: not paths_with(token), "a delete")
    return times


def measure(engine, vault: Path, rounds: int, notes: list[Path]) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {op: [] for op in OPERATIONS}
    for i in range(rounds):
        for op, seconds in one_round(engine, vault, notes[i % len(notes)]).items():
            samples[op].append(seconds)
        time.sleep(1)
    return samples


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vault", type=Path, required=True, help="a writable copy of the vault")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=10, help="rounds with `ragline watch`")
    parser.add_argument("--sensor-rounds", type=int, default=3, help="rounds with `ragline ui`")
    args = parser.parse_args()

    from rag_serving.config import parse_config_file
    from rag_serving.search import SearchEngine

    work = Path(tempfile.mkdtemp(prefix="ragline-watch-"))
    config_path = write_config(work / "ragline.toml", args.data_dir, args.vault)
    engine = SearchEngine(parse_config_file(config_path))
    notes = sorted(p for p in args.vault.rglob("*.md") if ".obsidian" not in p.parts)
    notes = notes[:: max(1, len(notes) // 50)]  # spread over the vault

    watch = _start(["--config", str(config_path), "watch"], work / "watch.log")
    try:
        _wait(lambda: "Watching" in (work / "watch.log").read_text(), "the watcher")
        wait_until_settled(args.data_dir)  # its catch-up run
        time.sleep(2)
        watched = measure(engine, args.vault, args.rounds, notes)
    finally:
        _stop(watch)

    wait_until_settled(args.data_dir)
    ui = save_to_searchable_setup(config_path, args.data_dir)
    try:
        sensed = measure(engine, args.vault, args.sensor_rounds, notes[1:])
    finally:
        _stop(ui)

    files = sum(1 for _ in args.vault.rglob("*.md"))
    data: dict[str, object] = {"notes": files, "rounds_watch": args.rounds,
                               "rounds_sensor": args.sensor_rounds}  # fmt: skip
    rows = []
    for op in OPERATIONS:
        w, s = watched[op], sensed[op]
        data[op] = {
            "watch_s": [round(x, 2) for x in w],
            "sensor_s": [round(x, 2) for x in s],
        }
        rows.append(
            f"| {op} | {statistics.median(w):.2f} s | {_p(w, 0.95):.2f} s | "
            f"{statistics.median(s):.1f} s | {_p(s, 0.95):.1f} s | "
            f"{statistics.median(s) / statistics.median(w):.1f}× |"
        )
    every_w = [x for op in OPERATIONS for x in watched[op]]
    every_s = [x for op in OPERATIONS for x in sensed[op]]
    data["all"] = {"watch_p50_s": round(statistics.median(every_w), 2),
                   "watch_p95_s": round(_p(every_w, 0.95), 2),
                   "sensor_p50_s": round(statistics.median(every_s), 1),
                   "sensor_p95_s": round(_p(every_s, 0.95), 1)}  # fmt: skip
    print(data)
    markdown = "\n".join([
        f"Vault: writable copy of obsidian-hub, {files} notes. `ragline watch` ({args.rounds} rounds) "
        f"against `ragline ui` on the defaults (sensor every 30 s; {args.sensor_rounds} rounds), "
        "same index, same run. Each round: an edit saved by rename-and-replace, a new note, "
        "a rename, a delete; from the file operation until a search in another process shows it.",
        "",
        "| operation | watch p50 | watch p95 | sensor path p50 | sensor path p95 | sensor / watch |",
        "|---|---|---|---|---|---|",
        *rows,
        f"| **all** | **{data['all']['watch_p50_s']} s** | **{data['all']['watch_p95_s']} s** | "
        f"{data['all']['sensor_p50_s']} s | {data['all']['sensor_p95_s']} s | "
        f"{statistics.median(every_s) / statistics.median(every_w):.1f}× |",
    ])  # fmt: skip
    save("watch_freshness", data, markdown,
         "python benchmarks/watch_freshness.py --vault VAULT_COPY --data-dir DIR")  # fmt: skip


if __name__ == "__main__":
    main()
