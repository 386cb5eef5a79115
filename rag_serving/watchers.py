"""Which ``ragline watch`` processes keep an index's sources fresh, and whether a file
they were to index is searchable yet.

A watcher leaves a marker (``<data_dir>/watch/<host>-<pid>.json``: its pid, host and
sources) while it runs, and removes it when it stops; a marker whose process is gone
(killed) is ignored. Only watchers on this host count: a pid elsewhere cannot be
checked. ``clip`` and ``remember`` then wait for the watcher's run instead of
starting one of their own.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rag_serving.config import RaglineConfig
from rag_serving.index.store import IndexStore
from rag_sources.scanning import source_root
from rag_sources.where import sql_in, sql_string

WATCH_FOLDER = "watch"
POLL_S = 0.2


@dataclass(frozen=True)
class Watcher:
    pid: int
    host: str
    sources: tuple[str, ...]


def _folder(config: RaglineConfig) -> Path:
    return Path(config.data_dir) / WATCH_FOLDER


def mark_watching(config: RaglineConfig, sources: Sequence[str]) -> Path:
    """Leave this process's marker; returns its path (``unmark`` removes it)."""
    folder = _folder(config)
    folder.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    path = folder / f"{host}-{os.getpid()}.json"
    info = {"pid": os.getpid(), "host": host, "sources": list(sources)}
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(info), encoding="utf-8")
    os.replace(temporary, path)
    return path


def unmark(path: Path) -> None:
    path.unlink(missing_ok=True)


def live_watcher(config: RaglineConfig, source: str) -> Watcher | None:
    """A running watcher of ``source`` on this host, if there is one."""
    folder = _folder(config)
    if not folder.is_dir():
        return None
    host = socket.gethostname()
    for marker in sorted(folder.glob("*.json")):
        try:
            info = json.loads(marker.read_text(encoding="utf-8"))
            watcher = Watcher(int(info["pid"]), str(info["host"]), tuple(info["sources"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if watcher.host != host or source not in watcher.sources:
            continue
        try:
            os.kill(watcher.pid, 0)
        except ProcessLookupError:
            continue  # killed: its marker stayed behind
        except PermissionError:
            pass
        return watcher
    return None


def searchable(store: IndexStore, source: str, paths: dict[str, str]) -> bool:
    """Whether each of ``paths`` (path → the sha256 of its bytes now) is indexed with
    that content by a run that has finished: its document holds that content and the
    source's last full-text update came after that document was parsed."""
    if not store.table_exists("documents") or not store.table_exists("source_state"):
        return False
    scope = f"source = {sql_string(source)}"
    rows = store.read(
        "documents",
        where=f"{scope} AND {sql_in('path', sorted(paths))}",
        columns=["path", "content_hash", "indexed_at"],
    ).to_pylist()
    found = {r["path"]: r for r in rows}
    if any(found.get(p, {}).get("content_hash") != digest for p, digest in paths.items()):
        return False
    states = store.read("source_state", where=scope, columns=["last_indexed_at"]).to_pylist()
    done: datetime | None = states[0]["last_indexed_at"] if states else None
    return done is not None and all(done >= found[p]["indexed_at"] for p in paths)


def wait_searchable(
    config: RaglineConfig, source: str, paths: Sequence[str], timeout_s: float
) -> bool:
    """Wait until ``paths`` (relative to the source's root) are ``searchable`` with
    what they hold now; False when ``timeout_s`` passed first."""
    root = source_root(config.source(source))
    digests = {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in paths}
    store = IndexStore(config.data_dir, read_consistency_s=0, index_uri=config.index_uri)
    deadline = time.monotonic() + timeout_s
    while True:
        if searchable(store, source, digests):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
