"""Freshness on a real vault (a writable copy; the index built by index_throughput.py).

Measures, in one run:
- a `source_changes` sensor tick with nothing changed, against a bare stat walk of
  the same folder (the work a tick cannot avoid);
- a whole indexing run with nothing changed, against the same bare stat walk;
- editing one paragraph of the longest note: chunks re-embedded (target <= 2);
- seconds from saving an edit to the hit being searchable, with `ragline ui`
  (webserver + daemon, sensor interval 5 s) running;
- moving 100 notes into a renamed folder: chunks re-embedded (target 0).

    python benchmarks/freshness.py --vault /tmp/ragline-bench/hub-vault --data-dir /tmp/ragline-bench/hub
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import save

SOURCE = "hub"


def write_config(path: Path, data_dir: Path, vault: Path, interval: int = 30) -> Path:
    import tomli_w

    path.write_bytes(tomli_w.dumps({
        "data_dir": str(data_dir),
        "freshness": {"sensor_interval_s": interval},
        "sources": [{"name": SOURCE, "kind": "markdown", "path": str(vault)}],
    }).encode())  # fmt: skip
    return path


def bare_stat_walk(root: Path) -> int:
    count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in {".obsidian", ".git", ".trash"}]
        for name in filenames:
            os.stat(os.path.join(dirpath, name))
            count += 1
    return count


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def run_index(config_path: Path) -> tuple[float, dict]:
    from rag_serving.config import parse_config_file
    from ragline.indexing import index_sources

    started = time.perf_counter()
    outcome = index_sources(parse_config_file(config_path), [SOURCE], full=False)[0]
    assert outcome.success, outcome.error
    return time.perf_counter() - started, outcome.metadata


def longest_note(vault: Path) -> Path:
    notes = [p for p in vault.rglob("*.md") if ".obsidian" not in p.parts]
    return max(notes, key=lambda p: p.stat().st_size)


def edit_paragraph(note: Path, marker: str) -> None:
    text = note.read_text(encoding="utf-8")
    paragraphs = text.split("\n\n")
    middle = len(paragraphs) // 2
    for offset in range(len(paragraphs)):
        i = (middle + offset) % len(paragraphs)
        if len(paragraphs[i].split()) > 12 and not paragraphs[i].lstrip().startswith(
            ("#", "---", "```", "|")
        ):
            paragraphs[i] = paragraphs[i] + f" {marker}"
            break
    note.write_text("\n\n".join(paragraphs), encoding="utf-8")


def folder_with_notes(vault: Path, count: int) -> list[Path]:
    best: list[Path] = []
    for folder in sorted(p for p in vault.rglob("*") if p.is_dir() and ".obsidian" not in p.parts):
        notes = sorted(folder.glob("*.md"))
        if len(notes) >= count:
            return notes[:count]
        best = max(best, notes, key=len)
    return best


def save_to_searchable_setup(config_path: Path, data_dir: Path) -> subprocess.Popen:
    """`ragline ui` started in its own session, once its first sensor tick's run (of
    the unchanged source) is over; stop it with ``os.killpg(ui.pid, SIGTERM)``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ)
    env.pop("DAGSTER_HOME", None)
    ui = subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), "ui", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
    )  # fmt: skip
    time.sleep(20)  # the daemon's first sensor tick runs the (unchanged) source once
    wait_until_settled(data_dir)
    return ui


def wait_until_settled(data_dir: Path, timeout_s: float = 900) -> None:
    """Wait until no run of the index's Dagster instance is queued or going."""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    instance = DagsterInstance.from_config(str(data_dir / "dagster"))
    active = [DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]
    deadline = time.time() + timeout_s
    while instance.get_runs_count(filters=RunsFilter(statuses=active)) and time.time() < deadline:
        time.sleep(1)


def save_to_searchable(config_path: Path, vault: Path, data_dir: Path) -> dict[str, float]:
    from rag_serving.config import parse_config_file
    from rag_serving.search import SearchEngine

    ui = save_to_searchable_setup(config_path, data_dir)
    try:
        engine = SearchEngine(parse_config_file(config_path))
        token = "zq" + uuid.uuid4().hex[:10]
        note = sorted(vault.rglob("*.md"))[len(list(vault.rglob("*.md"))) // 3]
        note.write_text(
            note.read_text(encoding="utf-8") + f"\n\nFreshness probe {token}.\n", encoding="utf-8"
        )
        saved = time.perf_counter()
        found = None
        while time.perf_counter() - saved < 600:
            hits = engine.search(token, k=1, mode="bm25").hits
            if hits and token in hits[0].snippet.replace("**", ""):
                found = time.perf_counter() - saved
                break
            time.sleep(0.25)
        assert found is not None, "the edit never became searchable"
        return {"save_to_searchable_s": round(found, 1)}
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        try:
            ui.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vault", type=Path, required=True, help="a writable copy of the vault")
    parser.add_argument("--data-dir", type=Path, required=True)
    args = parser.parse_args()

    from benchmarks.timing import median_sensor_tick

    work = Path(tempfile.mkdtemp(prefix="ragline-fresh-"))
    config_path = write_config(work / "ragline.toml", args.data_dir, args.vault)
    os.environ["RAGLINE_CONFIG"] = str(config_path)

    files = bare_stat_walk(args.vault)
    walk = timed(lambda: bare_stat_walk(args.vault), 5)
    tick_s = median_sensor_tick(config_path, SOURCE, repeat=5)

    run_index(config_path)  # settle: anything left from earlier runs
    idle_s, idle_meta = run_index(config_path)
    assert idle_meta["embeddings"]["embedded"] == 0

    note = longest_note(args.vault)
    edit_paragraph(note, "Edited for the freshness benchmark.")
    edit_s, edit_meta = run_index(config_path)

    notes = folder_with_notes(args.vault, 100)
    target = args.vault / f"renamed-{uuid.uuid4().hex[:6]}"
    target.mkdir()
    for path in notes:
        path.rename(target / path.name)
    move_s, move_meta = run_index(config_path)

    latency = save_to_searchable(write_config(work / "ui.toml", args.data_dir, args.vault, interval=5),
                                 args.vault, args.data_dir)  # fmt: skip
    data = {
        "files": files,
        "bare_stat_walk_s": round(statistics.median(walk), 3),
        "sensor_tick_no_change_s": round(tick_s, 3),
        "sensor_tick_vs_bare_walk": round(tick_s / statistics.median(walk), 2),
        "run_no_change_s": round(idle_s, 1),
        "run_no_change_vs_bare_walk": round(idle_s / statistics.median(walk), 1),
        "edit_note": str(note.relative_to(args.vault)),
        "edit_chunks_reembedded": edit_meta["embeddings"]["embedded"],
        "edit_run_s": round(edit_s, 1),
        "moved_notes": len(notes),
        "move_chunks_reembedded": move_meta["embeddings"]["embedded"],
        "move_chunks_reused": move_meta["embeddings"]["vectors_reused"],
        "move_run_s": round(move_s, 1),
        **latency,
    }
    print(data)
    markdown = "\n".join([
        f"Vault: writable copy of obsidian-hub, {files} files.", "",
        "| measure | value | baseline in the same run | ratio |", "|---|---|---|---|",
        f"| `source_changes` sensor tick, nothing changed | {data['sensor_tick_no_change_s']} s | bare stat walk {data['bare_stat_walk_s']} s | {data['sensor_tick_vs_bare_walk']} |",
        f"| whole indexing run, nothing changed | {data['run_no_change_s']} s | bare stat walk | {data['run_no_change_vs_bare_walk']} |",
        f"| one paragraph edited in the longest note (`{data['edit_note']}`) | **{data['edit_chunks_reembedded']}** chunks re-embedded, run {data['edit_run_s']} s | target ≤ 2 | |",
        f"| {len(notes)} notes moved to a renamed folder | **{data['move_chunks_reembedded']}** chunks re-embedded ({data['move_chunks_reused']} vectors reused), run {data['move_run_s']} s | target 0 | |",
        f"| save → searchable, `ragline ui` running, sensor interval 5 s | **{data['save_to_searchable_s']} s** | | |",
    ])  # fmt: skip
    save("freshness", data, markdown,
         "make bench (this step: python benchmarks/freshness.py --vault VAULT_COPY --data-dir DIR)")  # fmt: skip


if __name__ == "__main__":
    main()
