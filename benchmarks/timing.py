"""What the source benchmarks share: an indexing run timed with the embedder's own
share of it, and the median of repeated calls."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rag_assets import resources
from ragline.indexing import index_sources


class EmbedderClock:
    """Time spent inside the real embedder (its method wrapped on the shared instance)."""

    def __init__(self, config) -> None:
        self.embedder = resources._embedder(config.embedder.model_dump_json(), str(config.data_dir))
        self.inner = self.embedder.embed_documents
        self.seconds = 0.0
        self.inner(["load the model before the clock starts"])
        self.embedder.embed_documents = self._timed  # type: ignore[method-assign]

    def _timed(self, texts):
        started = time.perf_counter()
        out = self.inner(texts)
        self.seconds += time.perf_counter() - started
        return out

    def close(self) -> None:
        self.embedder.embed_documents = self.inner  # type: ignore[method-assign]


@dataclass(frozen=True)
class TimedIndex:
    outcome: Any  # ragline.indexing's outcome of the one source
    wall_s: float
    embedder_s: float

    @property
    def embedder_share(self) -> float:
        return round(self.embedder_s / self.wall_s, 3)


def timed_index(config) -> TimedIndex:
    """Index every source of ``config`` once (it must succeed), timing the run and the
    embedder inside it (the model is loaded before the clock starts)."""
    clock = EmbedderClock(config)
    started = time.perf_counter()
    [outcome] = index_sources(config, [], full=False)
    wall = time.perf_counter() - started
    clock.close()
    assert outcome.success, outcome.error
    return TimedIndex(outcome, wall, clock.seconds)


def median_seconds(fn: Callable[[], object], repeat: int = 7) -> float:
    """The median wall time of ``repeat`` calls of ``fn``."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def median_sensor_tick(config_path, source: str, repeat: int = 7) -> float:
    """The median time of a ``source_changes`` sensor tick that finds nothing changed
    (after a first tick has set the cursor); fails if a tick requests a run."""
    import os

    from dagster import build_sensor_context, instance_for_test

    from rag_assets.resources import RaglineConfigResource
    from rag_assets.sensors.source_changes import build_source_changes_sensor

    os.environ["RAGLINE_CONFIG"] = str(config_path)
    sensor = build_source_changes_sensor(30)
    settings = {"settings": RaglineConfigResource(config_path=str(config_path))}
    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", [source])
        cursor = sensor(build_sensor_context(instance=instance, resources=settings)).cursor
        tick = median_seconds(
            lambda: sensor(
                build_sensor_context(instance=instance, cursor=cursor, resources=settings)
            ),
            repeat,
        )
        quiet = sensor(build_sensor_context(instance=instance, cursor=cursor, resources=settings))
        assert not quiet.run_requests, f"source {source!r} changed during the benchmark"
    return tick
