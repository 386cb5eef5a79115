"""LanceDB access shared by the indexing assets (writes) and search (reads)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rag_serving.index import schema as schemas
from rag_serving.index.commit_lock import CommitLock, local_commit_lock
from rag_serving.index.cpu import check_lancedb_cpu
from rag_serving.index.layout import IndexLayout
from rag_serving.index.location import check_conditional_writes, storage_options

if TYPE_CHECKING:
    from rag_serving.config import RaglineConfig

_CONNECT_LOCK = threading.Lock()


class IndexStore:
    """The LanceDB database under ``data_dir/lancedb``, or at ``index_uri``.

    Readers pass ``read_consistency_interval`` so that a long-lived process (the
    MCP server) sees versions written by other processes. Every write holds
    ``commit_lock`` (see ``commit_lock.py``; by default a lock file of this data dir)
    and starts from the table's latest version. A writer (not ``read_only``) of an
    ``s3://`` index first checks that the store honours conditional writes
    (rag_serving/index/location.py).
    """

    def __init__(
        self,
        data_dir: Path,
        read_consistency_s: float | None = None,
        index_uri: str | None = None,
        *,
        read_only: bool = False,
        allow_unsafe_writes: bool = False,
        commit_lock: CommitLock | None = None,
    ):
        check_lancedb_cpu()
        import lancedb

        self.layout = IndexLayout(Path(data_dir), index_uri)
        self.commit_lock = commit_lock or local_commit_lock(self.layout.data_dir)
        if self.layout.remote:
            assert index_uri is not None
            if not read_only:
                check_conditional_writes(index_uri, allow_unsafe_writes)
        else:
            Path(self.layout.lancedb_uri).mkdir(parents=True, exist_ok=True)
        interval = None if read_consistency_s is None else timedelta(seconds=read_consistency_s)
        with _CONNECT_LOCK:
            self.db = lancedb.connect(
                self.layout.lancedb_uri,
                read_consistency_interval=interval,
                storage_options=storage_options(self.layout.lancedb_uri) or None,
            )
        self._tables: dict[str, Any] = {}

    @classmethod
    def of(
        cls,
        config: RaglineConfig,
        read_consistency_s: float | None = None,
        read_only: bool = False,
        commit_lock: CommitLock | None = None,
    ) -> IndexStore:
        """The index of ``config`` (its ``data_dir`` and ``index_uri``)."""
        return cls(
            config.data_dir,
            read_consistency_s,
            config.index_uri,
            read_only=read_only,
            allow_unsafe_writes=config.allow_unsafe_concurrent_writes,
            commit_lock=commit_lock,
        )

    @contextmanager
    def writing(self, *tables: str) -> Iterator[None]:
        """Hold the commit lock, with ``tables`` (those this store has open) at their
        latest version: a commit never starts from a version another writer replaced."""
        with self.commit_lock:
            for name in tables:
                if name in self._tables:
                    self._tables[name].checkout_latest()
            yield

    # ---- tables ------------------------------------------------------------

    def table_exists(self, name: str) -> bool:
        # A table this store has opened is known to exist: listing the tables costs a
        # round trip to LanceDB's loop (~1-2 ms), several per search otherwise.
        return name in self._tables or name in self._table_names()

    def _table_names(self) -> list[str]:
        result = self.db.list_tables()
        names = getattr(result, "tables", result)
        return list(names)

    def table(self, name: str, schema: pa.Schema | None = None) -> Any:
        """Open table ``name``, creating it with ``schema`` when it does not exist."""
        if name in self._tables:
            return self._tables[name]
        tbl = self._open_committed(name) if self.table_exists(name) else None
        if tbl is not None:
            if schema is not None and _missing_late_columns(name, tbl, schema):
                with self.writing():
                    tbl.checkout_latest()
                    _add_late_columns(name, tbl, schema)
        elif schema is None:
            raise KeyError(name)
        else:
            with self.writing():
                # Another writer may have created it since the check above (two embedding
                # steps of a new index): its table, primary key set, is the one to use.
                if name in self._table_names():
                    tbl = self._open_committed(name)
                if tbl is None:
                    tbl = self.db.create_table(name, schema=schema, exist_ok=True)
                    # Prevents duplicate rows for new keys when writers overlap (lancedb 0.40).
                    tbl.set_unenforced_primary_key(schemas.table_key(name))
        self._tables[name] = tbl
        return tbl

    def _open_committed(self, name: str) -> Any | None:
        """Table ``name``, or None when it is listed but has no version yet: a writer
        killed while creating it (a Celery worker, on object storage) leaves its folder
        behind, and ``create_table`` then makes the table there."""
        try:
            return self.db.open_table(name)
        except ValueError as exc:
            if "was not found" in str(exc):
                return None
            raise

    def files(self) -> Any:
        return self.table("files", schemas.FILES)

    def documents(self) -> Any:
        return self.table("documents", schemas.DOCUMENTS)

    def file_issues(self) -> Any:
        return self.table("file_issues", schemas.FILE_ISSUES)

    def staged_chunks(self) -> Any:
        return self.table("staged_chunks", schemas.STAGED_CHUNKS)

    def chunks(self, table: str, dimension: int | None = None) -> Any:
        """A generation's served chunks table (``chunks_<key>``)."""
        schema = schemas.chunks_schema(dimension) if dimension else None
        return self.table(table, schema)

    # ---- reads -------------------------------------------------------------

    def read(
        self,
        name: str,
        where: str | None = None,
        columns: Sequence[str] | None = None,
    ) -> pa.Table:
        """All rows of table ``name`` matching ``where`` (empty table if it does not exist)."""
        tbl = self._existing(name)
        if tbl is None:
            base = schema_for(name)
            if base is None:
                return pa.table({})
            return base.empty_table() if columns is None else base.empty_table().select(columns)
        query = tbl.search()
        if where:
            query = query.where(where)
        if columns:
            query = query.select(list(columns))
        return query.limit(None).to_arrow()

    def count(self, name: str, where: str | None = None) -> int:
        tbl = self._existing(name)
        return 0 if tbl is None else int(tbl.count_rows(where))

    def _existing(self, name: str) -> Any | None:
        """Table ``name`` if it exists and has a version; None otherwise."""
        if not self.table_exists(name):
            return None
        try:
            return self.table(name)
        except KeyError:
            return None

    # ---- writes ------------------------------------------------------------

    def apply_changes(
        self,
        name: str,
        schema: pa.Schema,
        upserts: pa.Table | Iterable[pa.RecordBatch] | None,
        delete_where: str | None = None,
        compare_columns: Sequence[str] = (),
    ) -> None:
        """Upsert ``upserts`` by key and delete rows matching ``delete_where`` that are
        not among them, in one commit, so readers never see a half-applied change.

        ``upserts`` may be an iterable of record batches in ``schema`` (at least one,
        made while LanceDB reads them): one commit without all rows in memory at once.
        With ``compare_columns``, a matched row is rewritten only when one of those
        columns differs.
        """
        tbl = self.table(name, schema)
        with self.writing(name):
            self._apply(tbl, name, schema, upserts, delete_where, compare_columns)

    def _apply(
        self,
        tbl: Any,
        name: str,
        schema: pa.Schema,
        upserts: pa.Table | Iterable[pa.RecordBatch] | None,
        delete_where: str | None,
        compare_columns: Sequence[str],
    ) -> None:
        if isinstance(upserts, pa.Table) and upserts.num_rows == 0:
            upserts = None
        if upserts is None:
            if delete_where:
                tbl.delete(delete_where)
            return
        key = schemas.table_key(name)
        merge = tbl.merge_insert(key)
        if compare_columns:
            changed = " OR ".join(f"target.{c} != source.{c}" for c in compare_columns)
            merge = merge.when_matched_update_all(where=changed)
        else:
            merge = merge.when_matched_update_all()
        merge = merge.when_not_matched_insert_all()
        if delete_where:
            merge = merge.when_not_matched_by_source_delete(delete_where)
        if isinstance(upserts, pa.Table):
            merge.execute(upserts.select(schema.names).cast(schema))
        else:
            _execute_streamed(merge, schema, upserts)

    def delete(self, name: str, where: str) -> None:
        if self.table_exists(name):
            table = self.table(name)
            with self.writing(name):
                table.delete(where)

    def drop(self, name: str) -> None:
        """Remove table ``name`` if it exists."""
        self._tables.pop(name, None)
        if self.table_exists(name):
            with self.writing():
                self.db.drop_table(name)

    def table_names(self) -> list[str]:
        return self._table_names()

    def refresh(self) -> None:
        """See the latest committed version of every open table."""
        for tbl in self._tables.values():
            tbl.checkout_latest()


_END = object()


def _execute_streamed(merge: Any, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
    """Run ``merge`` on ``batches`` as they are made, one commit.

    LanceDB pulls a reader's batches on a thread of its own; the batches are made
    here, in the calling thread, and handed over one at a time: made there, every
    batch's Python objects came from another malloc arena, and the process kept
    hundreds of MiB more.
    """
    handoff: queue.Queue[Any] = queue.Queue(maxsize=1)
    finished = threading.Event()
    errors: list[BaseException] = []

    def source() -> Iterator[pa.RecordBatch]:
        while (item := handoff.get()) is not _END:
            if isinstance(item, BaseException):
                raise RuntimeError("a batch could not be made")  # the caller raises item
            yield item

    def write() -> None:
        try:
            merge.execute(pa.RecordBatchReader.from_batches(schema, source()))
        except BaseException as exc:
            errors.append(exc)
        finally:
            finished.set()

    def hand(item: Any) -> bool:
        """Give ``item`` to the writer; False once it stopped reading (it failed)."""
        while not finished.is_set():
            try:
                handoff.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    worker = threading.Thread(target=write, name="lancedb-merge", daemon=True)
    worker.start()
    try:
        for batch in batches:
            if not hand(batch):
                break
    except BaseException as exc:
        hand(exc)
        worker.join()
        raise
    hand(_END)
    worker.join()
    if errors:
        raise errors[0]


def schema_for(name: str) -> pa.Schema | None:
    """The schema of a fixed table (None for a generation's ``chunks_<key>``)."""
    return {
        "files": schemas.FILES,
        "documents": schemas.DOCUMENTS,
        "file_issues": schemas.FILE_ISSUES,
        "staged_chunks": schemas.STAGED_CHUNKS,
        "source_state": schemas.SOURCE_STATE,
        "run_failures": schemas.RUN_FAILURES,
        "model_tags": schemas.MODEL_TAGS,
    }.get(name)


def _missing_late_columns(name: str, table: Any, schema: pa.Schema) -> list[pa.Field]:
    """The nullable columns added since the table's format (``schemas.LATE_COLUMNS``)
    that it lacks."""
    present = set(table.schema.names)
    return [
        schema.field(column)
        for table_name, column in schemas.LATE_COLUMNS
        if table_name == name and column not in present and column in schema.names
    ]


def _add_late_columns(name: str, table: Any, schema: pa.Schema) -> None:
    """Add to an existing table the columns it lacks (a writer fills them, readers of
    old rows see null)."""
    missing = _missing_late_columns(name, table, schema)
    if missing:
        table.add_columns(missing)
