"""``ragline watch``: a saved note searchable within seconds.

File-system events (watchfiles: inotify, FSEvents, ReadDirectoryChangesW) under the
sources' folders start a run of the indexing job for just the sources they touch, in
this long-lived process: no process is spawned per run, the embedder and the Dagster
instance stay loaded, and each run is recorded in the project's instance like any
other (the UI shows it, tagged ``ragline/launched_by: watch``). Events that arrive
together (a burst of saves, an editor's write-to-temp-and-rename) make one run;
events that arrive during a run make the next one.

A run started by events names the changed paths (``ragline/changed_paths``): the scan
looks at just those (a folder: walked; a path gone: what was under it deleted) and
the later stages touch only the documents there, so a save costs the same in a vault
of 300 notes and of 6,500. A kind that cannot list by path, more than
``MAX_CHANGED_PATHS`` paths, the catch-up run and the run after a failed one
reconcile the whole source, as the sensor and ``ragline index`` do.

The watcher records the source's change signal (``IndexLayout.watched_signal``), so
the stat-based sensor, which stays as the safety net for missed events (network
drives, sleep and wake), does not run a source again for changes the watcher has
indexed: before a whole-source run, as its listing; after runs of changed paths,
once the events are quiet, from one listing that it first compares with the index
(a difference means events were missed: the source is reconciled whole), and only
when no event arrived while it listed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_serving.config import RaglineConfig
from rag_serving.index.layout import IndexLayout
from rag_sources.errors import RaglineError
from ragline.indexing import InProcessIndexer, MaintenanceOutcome, SourceRunOutcome

# Events closer together than STEP_MS are one batch; a batch never waits longer than
# DEBOUNCE_MS for its last event (watchfiles' step and debounce).
STEP_MS = 100
DEBOUNCE_MS = 1000
WATCH_TAG = "ragline/changed"  # how many paths the events of a watch run named
CHANGED_PATHS_TAG = "ragline/changed_paths"  # rag_assets.assets.indexing (Dagster: lazy)
MAX_CHANGED_PATHS = 100  # more in one batch: the run reconciles the whole source
# Quiet batches (each RUST_TIMEOUT_MS without an event) before the watcher lists a
# source to record its signal: a save right after a run is not held up by the listing.
QUIET_BATCHES = 4
RUST_TIMEOUT_MS = 500
# After a run, this long without events: compact the index (maintenance_job). Every
# run adds table versions and fragments; `ragline ui`'s nightly schedule does the same.
MAINTAIN_AFTER_S = 600


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
    whole: bool = False  # the run reconciled the whole source (not only the changed paths)


def watched_sources(
    config: RaglineConfig, names: Iterable[str] = ()
) -> tuple[list[WatchedSource], list[str]]:
    """The sources to watch, and a note for each that is left to the sensor (a
    kind with nothing to watch, a folder that is missing now)."""
    from rag_assets.sources import source_kind

    selected = [config.source(name) for name in names] or list(config.sources)
    watched, notes = [], []
    for source in selected:
        kind = source_kind(source, config.data_dir, config.index_uri)
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
        maintain_after_s: float | None = MAINTAIN_AFTER_S,
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
        self._failed: set[str] = set()  # sources whose last run failed: next one whole
        self._dirty: set[str] = set()  # changed-path runs since the signal was recorded
        self._candidates: dict[str, str] = {}  # signals listed at a quiet moment
        self._store = None
        self._quiet = 0  # batches without events in a row
        self.maintain_after_s = maintain_after_s  # None: never
        self._runs_unmaintained = 0  # runs since the last maintenance
        self._last_event = time.monotonic()

    def touched(self, paths: Iterable[str]) -> dict[str, int]:
        """Sources whose items the event ``paths`` may change → how many paths each."""
        return {name: len(found) for name, found in self.changed_paths(paths).items()}

    def changed_paths(self, paths: Iterable[str]) -> dict[str, list[Path]]:
        """Sources whose items the event ``paths`` may change → those paths."""
        found: dict[str, list[Path]] = {}
        for raw in sorted(set(paths)):  # one path may come with several events
            path = Path(raw)
            if path == self.data_dir or self.data_dir in path.parents:
                continue  # the index's own writes (a data_dir inside a source)
            for source in self.sources:
                if source.owns(path) and source.kind.watches(path):  # type: ignore[attr-defined]
                    found.setdefault(source.name, []).append(path)
        return found

    def index(self, name: str, changed: list[Path] | None, batch_seen: float) -> WatchRun:
        """Run the indexing job for source ``name``: for the ``changed`` paths only, or
        (None, too many, the last run failed) for the whole source, its change signal
        recorded first."""
        paths = [Path(p) for p in changed or ()]
        tags = {WATCH_TAG: str(len(paths))}
        whole = changed is None or len(paths) > MAX_CHANGED_PATHS or name in self._failed
        if whole:
            self._record_signal(name)
            self._dirty.discard(name)
        else:
            tags[CHANGED_PATHS_TAG] = json.dumps([str(p) for p in paths])
        self._candidates.pop(name, None)
        waited = time.monotonic() - batch_seen
        outcome = self.indexer.run(name, tags)
        self._runs_unmaintained += 1
        if not outcome.success:
            self._failed.add(name)
        else:
            self._failed.discard(name)
        if not whole:  # listed at the next quiet moment: a failed run's changes, run whole
            self._dirty.add(name)
        return WatchRun(outcome, len(paths), waited, whole)

    def settle(self, touched: Iterable[str], quiet: int = QUIET_BATCHES) -> list[str]:
        """Between batches: record the signals listed at the last quiet moment for the
        sources this batch does not touch (an event while listing: not recorded); after
        ``quiet`` batches without events, list the sources that changed-path runs
        left, and return those whose listing differs from the index (events were
        missed: the caller runs them whole)."""
        touched = set(touched)
        for name, fingerprint in self._candidates.items():
            if name not in touched:
                self._write_signal(name, fingerprint)
        self._candidates.clear()
        self._quiet = 0 if touched else self._quiet + 1
        if self._quiet < quiet:
            return []
        from rag_assets.sources import source_kind
        from rag_assets.stages.scan import listing_is_indexed
        from rag_serving.index.store import IndexStore

        missed = []
        for name in sorted(self._dirty):
            if name in self._failed:  # its last run failed: tried once more, whole
                missed.append(name)
                continue
            kind = source_kind(
                self.config.source(name), self.config.data_dir, self.config.index_uri
            )
            try:
                items = list(kind.list_items())
            except RaglineError:
                continue
            if self._store is None:
                self._store = IndexStore.of(self.config, read_only=True)
            self._store.refresh()
            if listing_is_indexed(self._store, kind, items):
                self._candidates[name] = kind.signal_of(items)
            else:
                missed.append(name)
        self._dirty.clear()
        return missed

    def _record_signal(self, name: str) -> None:
        from rag_assets.sources import source_kind

        try:
            signal = source_kind(
                self.config.source(name), self.config.data_dir, self.config.index_uri
            ).change_signal()
        except RaglineError:
            return  # the run reports what is wrong with the source
        self._write_signal(name, signal)

    def _write_signal(self, name: str, signal: str) -> None:
        from rag_assets.sensors.source_changes import settings_fingerprint

        target = self.layout.watched_signal(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        fingerprint = f"{signal}-{settings_fingerprint(self.config)}"
        temporary = target.with_suffix(".tmp")
        temporary.write_text(json.dumps({"fingerprint": fingerprint}), encoding="utf-8")
        temporary.replace(target)

    def maintain_if_idle(self, now: float) -> MaintenanceOutcome | None:
        """Run the maintenance job when a run happened since the last one and no event
        came for ``maintain_after_s`` seconds; its outcome, or None."""
        if self.maintain_after_s is None or not self._runs_unmaintained:
            return None
        if now - self._last_event < self.maintain_after_s:
            return None
        self._runs_unmaintained = 0
        return self.indexer.maintain()

    def run(
        self,
        on_run: Callable[[WatchRun], None] | None = None,
        stop: threading.Event | None = None,
        on_ready: Callable[[], None] | None = None,
        catch_up: bool = True,
        on_maintenance: Callable[[MaintenanceOutcome], None] | None = None,
    ) -> None:
        """Watch until ``stop`` is set (or Ctrl-C). Once the watches are in place,
        ``on_ready`` is called and, with ``catch_up``, every watched source is run
        once for what changed while nothing watched it. Idle after runs, the index
        is compacted (``maintain_if_idle``)."""
        import watchfiles

        from rag_serving.watchers import mark_watching, unmark

        # `clip` and `remember` wait for this watcher's run rather than start their own.
        marker = mark_watching(self.config, [s.name for s in self.sources])
        try:
            self._watch(watchfiles, on_run, stop, on_ready, catch_up, on_maintenance)
        finally:
            unmark(marker)

    def _watch(
        self,
        watchfiles: Any,
        on_run: Callable[[WatchRun], None] | None,
        stop: threading.Event | None,
        on_ready: Callable[[], None] | None,
        catch_up: bool,
        on_maintenance: Callable[[MaintenanceOutcome], None] | None,
    ) -> None:
        roots = sorted({root for source in self.sources for root in source.roots})
        ready = False
        events = watchfiles.watch(
            *roots,
            watch_filter=None,
            step=self.step_ms,
            debounce=self.debounce_ms,
            stop_event=stop,
            rust_timeout=RUST_TIMEOUT_MS,
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
                        self._report(self.index(source.name, None, time.monotonic()), on_run)
            batch_seen = time.monotonic()
            batch = self.changed_paths(path for _, path in changes)
            if batch:
                self._last_event = batch_seen
            else:
                maintained = self.maintain_if_idle(batch_seen)
                if maintained is not None and on_maintenance is not None:
                    on_maintenance(maintained)
            for name in self.settle(batch):
                self._report(self.index(name, None, batch_seen), on_run)
            for name, paths in batch.items():
                self._report(self.index(name, paths, batch_seen), on_run)

    @staticmethod
    def _report(run: WatchRun, on_run: Callable[[WatchRun], None] | None) -> None:
        if on_run is not None:
            on_run(run)
