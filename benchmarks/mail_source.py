"""`mail` sources: indexing speed over all of corpora/email, no-change sensor tick.

    python benchmarks/mail_source.py [--json out.json] [--save]

1. **Speed.** corpora/email (notmuch Maildirs, the LKML mbox, patchwork and perceval
   mboxes: ~690 messages) is indexed from scratch as one `mail` source through the
   real Dagster job: messages/s, the embedder's share of the wall time, and a second
   run with nothing changed.
2. **Sensor tick.** The ``source_changes`` sensor with nothing changed, and the
   kind's ``change_signal`` alone, against a bare ``os.stat`` of every file of the
   corpus (the floor for anything that looks at each file).

Results go to ``--json`` (a path); ``--save`` also writes benchmarks/results and the
docs section.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tomli_w

from benchmarks.report import SHARED_DATA, save
from benchmarks.timing import median_seconds, median_sensor_tick, timed_index
from rag_serving.config import parse_config_file
from ragline.indexing import index_sources

CORPUS = SHARED_DATA / "corpora" / "email"
SOURCE = "mail"


def write_config(path: Path, data_dir: Path, corpus: Path) -> Path:
    source = {"name": SOURCE, "kind": "mail", "path": str(corpus)}
    path.write_bytes(tomli_w.dumps({"data_dir": str(data_dir), "sources": [source]}).encode())
    return path


def speed(work: Path) -> tuple[dict[str, object], Path]:
    config_path = write_config(work / "mail.toml", work / "data", CORPUS)
    config = parse_config_file(config_path)
    run = timed_index(config)
    outcome, wall = run.outcome, run.wall_s
    from rag_serving.index.store import IndexStore

    store = IndexStore(config.data_dir)
    messages = store.count("documents", "file_type = 'email'")
    attachments = store.count("documents", "file_type != 'email'")
    from rag_serving.status import index_status

    problems = len(index_status(config).sources[0].issues)
    started = time.perf_counter()
    [again] = index_sources(config, [], full=False)
    unchanged_s = time.perf_counter() - started
    return {
        "messages": messages,
        "attachments": attachments,
        "problems": problems,
        "chunks": outcome.metadata["embeddings"].get("new", 0),
        "wall_s": round(wall, 1),
        "messages_per_s": round(messages / wall, 1),
        "embedder_s": round(run.embedder_s, 1),
        "embedder_share_of_wall": run.embedder_share,
        "no_change_run_s": round(unchanged_s, 1),
        "no_change_parsed": again.metadata["parsed_documents"].get("new", 0),
        "no_change_embedded": again.metadata["embeddings"]["embedded"],
    }, config_path


def bare_stat_walk(root: Path) -> int:
    count = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            os.stat(os.path.join(folder, name))
            count += 1
    return count


def sensor_tick(config_path: Path) -> dict[str, float]:
    from rag_assets.sources import source_kind

    config = parse_config_file(config_path)
    kind = source_kind(config.sources[0], config.data_dir)
    files = bare_stat_walk(CORPUS)
    bare = median_seconds(lambda: bare_stat_walk(CORPUS))
    signal = median_seconds(kind.change_signal)
    listing = median_seconds(lambda: list(kind.list_items()))  # the scan's listing, caches warm
    tick = median_sensor_tick(config_path, SOURCE)
    return {
        "files": files,
        "sensor_tick_no_change_s": round(tick, 4),
        "change_signal_s": round(signal, 4),
        "cached_listing_s": round(listing, 4),
        "bare_stat_walk_s": round(bare, 4),
        "change_signal_vs_bare": round(signal / bare, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--save", action="store_true", help="write results and the docs section")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragline-mail-bench-"))
    try:
        run, config_path = speed(work)
        print(json.dumps(run, indent=2), flush=True)
        tick = sensor_tick(config_path)
        print(json.dumps(tick, indent=2), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    data: dict[str, object] = {
        "speed": run,
        "sensor": tick,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    if args.save:
        save("mail_source", data, markdown(data), "python benchmarks/mail_source.py --save")


def markdown(data: dict) -> str:
    run, tick = data["speed"], data["sensor"]
    other = run["wall_s"] - run["embedder_s"]
    return "\n".join(
        [
            "All of corpora/email as one `mail` source, indexed from scratch through the "
            "Dagster job (notmuch Maildirs, the LKML mbox, patchwork and perceval mboxes).",
            "",
            "| messages | attachments | problems | chunks | wall | messages/s | embedder share "
            "| everything but embedding | no-change run |",
            "|---|---|---|---|---|---|---|---|---|",
            f"| {run['messages']} | {run['attachments']} | {run['problems']} | {run['chunks']} "
            f"| {run['wall_s']} s | {run['messages_per_s']} | {run['embedder_share_of_wall']:.0%} "
            f"| {other:.1f} s | {run['no_change_run_s']} s, {run['no_change_embedded']} embedded |",
            "",
            f"No-change `source_changes` tick: {tick['sensor_tick_no_change_s']} s; the kind's "
            f"change signal alone {tick['change_signal_s']} s against {tick['bare_stat_walk_s']} s "
            f"for a bare `os.stat` of each of the corpus's {tick['files']} files "
            f"({tick['change_signal_vs_bare']}×: Maildir `cur/`/`new/` folders are stat'ed, "
            f"not their files); the scan's cached listing {tick['cached_listing_s']} s. "
            f"Peak RSS {data['peak_rss_mib']} MiB.",
        ]
    )


if __name__ == "__main__":
    main()
