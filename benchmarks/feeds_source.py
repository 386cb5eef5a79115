"""`feeds` sources: entries/s for all of corpora/feeds through the real job.

    python benchmarks/feeds_source.py [--json out.json] [--save]

Every file of corpora/feeds (feed-rs-fixtures and rss-parser-inputs, the malformed
ones included) is served by a loopback HTTP server and configured as one feed of one
``feeds`` source. The source is indexed from scratch by the Dagster job: entries/s,
the embedder's share of the wall time, and the fetch-and-parse time alone (the
archive refresh without indexing, the same run's baseline). A second run with every
feed due again gets only 304 answers: its wall time is the cost of a poll with
nothing new.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tomli_w

from benchmarks.report import SHARED_DATA, save
from benchmarks.timing import timed_index
from rag_serving.config import parse_config_file
from ragline.indexing import index_sources
from tests.feed_server import FeedServer

FEEDS = SHARED_DATA / "corpora" / "feeds"
SOURCE = "feeds"


def feed_files() -> list[Path]:
    return sorted(p for p in FEEDS.rglob("*") if p.is_file() and not p.name.endswith(".serde.json"))


def write_config(path: Path, data_dir: Path, urls: list[str]) -> Path:
    source = {"name": SOURCE, "kind": "feeds", "urls": urls, "timeout_seconds": 10}
    path.write_bytes(tomli_w.dumps({"data_dir": str(data_dir), "sources": [source]}).encode())
    return path


def age_archive(state_dir: Path, hours: int = 2) -> None:
    from datetime import datetime, timedelta

    for path in (state_dir / "feeds").glob("*.json"):
        raw = json.loads(path.read_text())
        if raw.get("last_fetch"):
            raw["last_fetch"] = (
                datetime.fromisoformat(raw["last_fetch"]) - timedelta(hours=hours)
            ).isoformat()
            path.write_text(json.dumps(raw))


def run(work: Path) -> dict[str, object]:
    from rag_serving.index.layout import IndexLayout
    from rag_serving.index.store import IndexStore
    from rag_sources.kinds.feeds.poll import refresh_feeds

    with FeedServer() as server:
        urls = []
        for path in feed_files():
            route = "/" + path.relative_to(FEEDS).as_posix()
            server.put(route, path.read_bytes(), "application/xml")
            urls.append(server.url(route))
        # the baseline: fetching and parsing into a scratch archive, nothing indexed
        config = parse_config_file(write_config(work / "bare.toml", work / "bare-data", urls))
        started = time.perf_counter()
        report = refresh_feeds(config.sources[0], work / "bare-state")  # type: ignore[arg-type]
        bare_s = time.perf_counter() - started
        config = parse_config_file(write_config(work / "feeds.toml", work / "data", urls))
        run = timed_index(config)
        outcome, wall = run.outcome, run.wall_s
        store = IndexStore(config.data_dir)
        entries = store.count("documents")
        problems = store.count("files", "starts_with(fingerprint, '!')")
        age_archive(IndexLayout(config.data_dir).source_state_dir(SOURCE))
        before = len(server.requests)
        started = time.perf_counter()
        [again] = index_sources(config, [], full=False)
        poll_s = time.perf_counter() - started
        answers = [r.status for r in server.requests[before:]]
    return {
        "feeds": len(urls),
        "feeds_failed": report.count("error"),
        "entries": entries,
        "feed_problems": problems,
        "chunks": outcome.metadata["embeddings"].get("new", 0),
        "wall_s": round(wall, 1),
        "entries_per_s": round(entries / wall, 1),
        "embedder_s": round(run.embedder_s, 1),
        "embedder_share_of_wall": run.embedder_share,
        "fetch_and_parse_s": round(bare_s, 2),
        "wall_vs_fetch_and_parse": round(wall / bare_s, 1),
        "poll_all_304_s": round(poll_s, 1),
        "poll_304_answers": answers.count(304),
        "poll_embedded": again.metadata["embeddings"]["embedded"],
    }


def markdown(data: dict) -> str:
    r = data["speed"]
    return "\n".join(
        [
            f"All of corpora/feeds ({r['feeds']} files, {r['feeds_failed']} malformed on "
            f"purpose and recorded as problems) served from 127.0.0.1 as one `feeds` source.",
            "",
            "| entries | chunks | wall s | entries/s | embedder share | fetch+parse s | "
            "poll, all 304 s |",
            "|---|---|---|---|---|---|---|",
            f"| {r['entries']} | {r['chunks']} | {r['wall_s']} | {r['entries_per_s']} | "
            f"{r['embedder_share_of_wall']:.0%} | {r['fetch_and_parse_s']} | {r['poll_all_304_s']} |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="write the results to this file")
    parser.add_argument("--save", action="store_true", help="save to benchmarks/results and docs")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragline-feeds-bench-"))
    try:
        data: dict[str, object] = {"speed": run(work)}
        data["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(data, indent=2))
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    if args.save:
        save("feeds_source", data, markdown(data), "python benchmarks/feeds_source.py --save")


if __name__ == "__main__":
    main()
