"""``ragline watch``: a saved note searchable within seconds.

File-system events (watchfiles: inotify, FSEvents, ReadDirectoryChangesW) under the
sources' folders start a run of the indexing job for just the sources they touch, in
this long-lived process: no process is spawned per run, the embedder and the Dagster
instance stay loaded, and each run is recorded in the project's instance like any
other (the UI shows it, tagged ``ragline/launched_by: watch``). Events that arrive
together (a burst of saves, an editor's write-to-temp-and-rename) make one run;
events that arrive during a run make the next one.

Before each run the watcher records the source's change signal
(``IndexLayout.watched_signal``): the stat-based sensor, which stays as the safety
net for missed events (network drives, sleep and wake), does not run a source again
for changes the watcher has indexed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rag_serving.config import RaglineConfig
from rag_serving.errors import RaglineError
from rag_serving.index.layout import IndexLayout
from ragline.indexing import InProcessIndexer, SourceRunOutcome

# Events closer together than STEP_MS are one batch; a batch never waits longer than
# DEBOUNCE_MS for its last event (watchfiles' step and debounce).
STEP_MS = 100
DEBOUNCE_MS = 1000
WATCH_TAG = "ragline/changed"  # how many paths the events of a watch run named


@dataclass(frozen=True)
class WatchedSource:
    name: str
    kind: object  # rag_assets.sources.SourceKind (imported lazily: Dagster)
    roots: tuple[Path, ...]

    def owns(self, path: Path) -> bool:
        return any(path == root or root in path.parents for root in self.roots)


@dataclass(frozen=True)
class WatchRun:
    """One run started by events: the outcome and how long the changes waited."""

    outcome: SourceRunOutcome
    changed_paths: int
    waited_s: float  # from the batch of events to the run's start (runs of other sources)


def watched_sources(
    config: RaglineConfig, names: Iterable[str] = ()
) -> tuple[list[WatchedSource], list[str]]:
    """The sources to watch, and a note for each that is left to the sensor (a
    kind with nothing to watch, a folder that is missing now)."""
    from rag_assets.sources import source_kind

    selected = [config.source(name) for name in names] or list(config.sources)
    watched, notes = [], []
    for source in selected:
        kind = source_kind(source, config.data_dir)
        roots = tuple(Path(root).expanduser().absolute() for root in kind.watch_roots())
        if not roots:
            notes.append(f"{source.name}: a {source.kind} source has no folder to watch; "
                         "the sensor of `ragline ui` keeps it fresh")  # fmt: skip
            continue
        missing = [root for root in roots if not root.exists()]
        if missing:
            notes.append(f"{source.name}: {missing[0]} is missing; not watched (mount it "
                         "and restart `ragline watch`)")  # fmt: skip
            continue
        watched.append(WatchedSource(source.name, kind, roots))
    return watched, notes


class SourceWatcher:
    """Watches the sources' folders and indexes each touched source in this process."""

    def __init__(
        self,
        config: RaglineConfig,
        names: Iterable[str] = (),
        step_ms: int = STEP_MS,
        debounce_ms: int = DEBOUNCE_MS,
    ):
        self.config = config
        self.layout = IndexLayout(config.data_dir)
        self.sources, self.notes = watched_sources(config, names)
        if not self.sources:
            raise RaglineError(
                "no source to watch: " + ("; ".join(self.notes) or "no [[sources]] configured")
            )
        self.step_ms = step_ms
        self.debounce_ms = debounce_ms
        self.indexer = InProcessIndexer(config, launched_by="watch", capture_logs=False)
        self.indexer.add_partitions([s.name for s in self.sources])
        self.data_dir = Path(config.data_dir).expanduser().absolute()

    def touched(self, paths: Iterable[str]) -> dict[str, int]:
        """Sources whose items the event ``paths`` may change → how many paths each."""
        counts: dict[str, int] = {}
        for raw in set(paths):  # one path may come with several events (deleted, added)
            path = Path(raw)
            if path == self.data_dir or self.data_dir in path.parents:
                continue  # the index's own writes (a data_dir inside a source)
            for source in self.sources:
                if source.owns(path) and source.kind.watches(path):  # type: ignore[attr-defined]
                    counts[source.name] = counts.get(source.name, 0) + 1
        return counts

    def index(self, name: str, changed_paths: int, batch_seen: float) -> WatchRun:
        """Record the source's change signal, then run the indexing job for it."""
        self._record_signal(name)
        waited = time.monotonic() - batch_seen
        outcome = self.indexer.run(name, {WATCH_TAG: str(changed_paths)})
        return WatchRun(outcome, changed_paths, waited)

    def _record_signal(self, name: str) -> None:
        from rag_assets.sensors.source_changes import settings_fingerprint
        from rag_assets.sources import source_kind

        try:
            signal = source_kind(self.config.source(name), self.config.data_dir).change_signal()
        except RaglineError:
            return  # the run reports what is wrong with the source
        target = self.layout.watched_signal(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        fingerprint = f"{signal}-{settings_fingerprint(self.config)}"
        temporary = target.with_suffix(".tmp")
        temporary.write_text(json.dumps({"fingerprint": fingerprint}), encoding="utf-8")
        temporary.replace(target)

    def run(
        self,
        on_run: Callable[[WatchRun], None] | None = None,
        stop: threading.Event | None = None,
        on_ready: Callable[[], None] | None = None,
        catch_up: bool = True,
    ) -> None:
        """Watch until ``stop`` is set (or Ctrl-C). Once the watches are in place,
        ``on_ready`` is called and, with ``catch_up``, every watched source is run
        once for what changed while nothing watched it."""
        import watchfiles

        roots = sorted({root for source in self.sources for root in source.roots})
        ready = False
        events = watchfiles.watch(
            *roots,
            watch_filter=None,
            step=self.step_ms,
            debounce=self.debounce_ms,
            stop_event=stop,
            rust_timeout=500,
            yield_on_timeout=True,
            raise_interrupt=False,
            ignore_permission_denied=True,
        )
        for changes in events:
            if not ready:
                ready = True
                if on_ready is not None:
                    on_ready()
                if catch_up:
                    for source in self.sources:
                        self._report(self.index(source.name, 0, time.monotonic()), on_run)
            if not changes:
                continue
            batch_seen = time.monotonic()
            for name, count in self.touched(path for _, path in changes).items():
                self._report(self.index(name, count, batch_seen), on_run)

    @staticmethod
    def _report(run: WatchRun, on_run: Callable[[WatchRun], None] | None) -> None:
        if on_run is not None:
            on_run(run)
