"""A search host's own Tantivy index of an index on object storage.

The LanceDB tables are shared; the full-text index is derived, and each host that
serves searches keeps one under ``<data_dir>/search-fulltext/<generation key>``:
built from the generation's chunks table on first use, then caught up with each
new version of the table (rows compared by ``row_hash``, only what changed is
rewritten). It is apart from the writers' ``fulltext/`` folder so that a search
never takes the Tantivy writer lock an indexing run on the same host needs.

Several search processes of one host share the folder: a file lock lets one
catch up while the others go on serving the previous commit. A replica of a
generation the manifest no longer names (an embedder switch promoted another, and
the old one was dropped) is removed by the next search process that opens the
index, once no process has touched it for ``PRUNE_GRACE_S``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rag_serving.index.fulltext import FulltextIndex, is_outdated
from rag_serving.index.store import IndexStore
from rag_sources.where import sql_in

COLUMNS = [
    "chunk_id", "doc_id", "source", "kind", "path", "title", "heading", "tags", "text",
    "modified", "row_hash", "facets",
]  # fmt: skip
BATCH_ROWS = 1024
LOOKUP_LIMIT = 2000  # up to this many changed rows are read by id, more by one scan
_STAMP = "replica.json"
# A replica unused this long is no longer served by any process of the host: each
# looks at the manifest at least once per read consistency interval (seconds).
PRUNE_GRACE_S = 600.0


class FulltextReplica:
    """The Tantivy index of chunks table ``table``, kept in ``folder`` on this host."""

    def __init__(
        self, store: IndexStore, folder: Path, table: str, languages: Mapping[str, str]
    ) -> None:
        self.store = store
        self.folder = Path(folder)
        self.table = table
        self.languages = dict(languages)  # source → its `language` setting
        self.index: FulltextIndex | None = None

    def open(self) -> FulltextIndex:
        """The index, built from the table first when this host has none (or an
        outdated one)."""
        if self._stamp() is None or is_outdated(self.folder):
            with self._locked(wait=True):
                if self._stamp() is None or is_outdated(self.folder):
                    self._rebuild()
        self.index = FulltextIndex(self.folder)
        return self.index

    def catch_up(self, version: int) -> bool:
        """Bring the index to ``version`` of the table (or later); False when another
        process of this host is doing it (this one serves the last commit meanwhile)."""
        if self._stamp() == self._identity(version):
            return True
        with self._locked(wait=False) as held:
            if not held:
                return False
            if self._stamp() == self._identity(version):
                return True
            self._update()
        return True

    def _identity(self, version: int) -> tuple[int, int]:
        """A table version with its row count: a generation's table dropped and made
        again restarts its versions, and the count tells a coincidence apart."""
        rows = self.store.count(self.table) if version >= 0 else 0  # manifest metadata
        return version, rows

    # ---- building -----------------------------------------------------------

    def _table_version(self) -> int:
        return int(self.store.table(self.table).version) if self._exists() else -1

    def _exists(self) -> bool:
        return self.store.table_exists(self.table)

    def _rebuild(self) -> None:
        version = self._identity(self._table_version())  # rows read next: this or later
        rows = self._rows(None) if version[0] >= 0 else iter(())
        FulltextIndex.rebuild(self.folder, rows, self.languages)
        self._write_stamp(version)

    def _update(self) -> None:
        version = self._identity(self._table_version())
        index = self.index or FulltextIndex(self.folder)
        index.finish_documents()  # an update stopped between its two commits
        lance = self._lance_hashes()
        held = index.row_hashes()
        stale = [cid for cid, digest in held.items() if lance.get(cid) != digest]
        add = {cid for cid, digest in lance.items() if held.get(cid) != digest}
        if stale or add:
            by_source: dict[str, list[dict[str, Any]]] = {}
            for row in self._rows(add) if add else ():
                by_source.setdefault(row["source"], []).append(row)
            # One commit per language setting (usually one): readers see each whole.
            languages = {self.languages.get(s, "auto") for s in by_source} or {"auto"}
            for language in sorted(languages):
                rows = [
                    row
                    for source, group in by_source.items()
                    if self.languages.get(source, "auto") == language
                    for row in group
                ]
                index.replace(stale if language == min(languages) else [], rows, language)
        self._write_stamp(version)

    def _lance_hashes(self) -> dict[str, str]:
        if not self._exists():
            return {}
        rows = self.store.read(self.table, columns=["chunk_id", "row_hash"])
        ids, hashes = rows.column("chunk_id").to_pylist(), rows.column("row_hash").to_pylist()
        return dict(zip(ids, hashes, strict=True))

    def _rows(self, wanted: set[str] | None) -> Iterator[dict[str, Any]]:
        """The table's rows (those of ``wanted`` ids), with their documents' aliases."""
        query = self.store.table(self.table).search()
        if wanted is not None and len(wanted) <= LOOKUP_LIMIT:
            query = query.where(sql_in("chunk_id", sorted(wanted)))
        aliases = {
            row["doc_id"]: row["aliases"]
            for row in self.store.read("documents", columns=["doc_id", "aliases"]).to_pylist()
        }
        for batch in query.select(COLUMNS).limit(None).to_batches(BATCH_ROWS):
            for row in batch.to_pylist():
                if wanted is None or row["chunk_id"] in wanted:
                    row["aliases"] = aliases.get(row["doc_id"]) or []
                    yield row

    # ---- the stamp and the lock -------------------------------------------------

    def _stamp(self) -> tuple[int, int] | None:
        """The table version (and row count) the index holds (None: no index built
        here yet)."""
        try:
            data = json.loads((self.folder / _STAMP).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("table") != self.table:
            return None
        return int(data.get("version", -1)), int(data.get("rows", -1))

    def _write_stamp(self, identity: tuple[int, int]) -> None:
        target = self.folder / _STAMP
        temporary = target.with_name(f"{_STAMP}.{os.getpid()}.tmp")
        version, rows = identity
        payload = {"table": self.table, "version": version, "rows": rows}
        temporary.write_text(json.dumps(payload), "utf-8")
        temporary.replace(target)

    @contextmanager
    def _locked(self, wait: bool) -> Iterator[bool]:
        """Hold this replica's lock (yields False at once when ``wait`` is False and
        another process holds it)."""
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        with open(self.folder.parent / f"{self.folder.name}.lock", "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def prune_replicas(root: Path, keep: set[str], grace_s: float = PRUNE_GRACE_S) -> list[str]:
    """Remove the replicas under ``root`` (``<data_dir>/search-fulltext``) of the
    generations not in ``keep`` that no process has touched for ``grace_s`` seconds
    and whose lock is free; returns the removed generation keys."""
    removed: list[str] = []
    if not root.is_dir():
        return removed
    now = time.time()
    for folder in sorted(root.iterdir()):
        if not folder.is_dir() or folder.name in keep:
            continue
        stamp = folder / _STAMP
        touched = (stamp if stamp.exists() else folder).stat().st_mtime
        if now - touched < grace_s:
            continue
        lock = root / f"{folder.name}.lock"
        with open(lock, "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a process is catching it up: in use
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
        lock.unlink(missing_ok=True)
    return removed
