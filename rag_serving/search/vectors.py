"""Exact cosine search over a chunks table held in memory, for warm processes.

Below the size at which the table gets a vector index, LanceDB answers a query by a
flat scan whose fixed costs (plan, async round trips, reading the column) dominate:
~23 ms for 35k chunks where the arithmetic takes ~3 ms. A long-lived engine (the
MCP server, ``ragline watch``, a benchmark) keeps the vectors as one normalised
float32 matrix and scans it with numpy, reloading it when the table's version
changes (checked at most once per read-consistency interval by LanceDB itself).
The hits' own columns (``row_columns``: text, path, title…) are kept beside it as an
Arrow table, so a warm search reads its hits without a LanceDB query (a take by
row id costs ~50 ms on a table of many fragments, as a fresh index is). Above the
vector limit (or with a vector index) the hits' columns alone are still kept while
they fit ``ROW_BUDGET_BYTES``: a take of 10 rows from LanceDB costs ~4 ms at 100k
chunks, longer than the BM25 search it serves.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

# The matrix is kept for tables up to this many rows (150 MB at 384 dimensions, plus
# the hits' columns, ~1 KB of text a row); larger tables have a vector index, which
# LanceDB searches faster.
MAX_ROWS = 100_000
# The hits' columns (text, path, title…) are kept up to this size when the vectors are
# not: ~92 MB at 100k chunks of ~1 KB.
ROW_BUDGET_BYTES = 128 * 2**20
_BLAS: Any = None  # threadpoolctl's controller, made on first use


@dataclass
class _Matrix:
    version: int
    ids: list[str]
    vectors: np.ndarray | None  # (rows, dimension), rows normalised; None: rows only
    sources: np.ndarray  # source name per row
    kinds: np.ndarray
    rows: Any  # pyarrow.Table of the row columns, in the order of ``ids``
    positions: dict[str, int]  # chunk id → its position in ``ids`` and ``rows``


class InMemoryVectors:
    """One chunks table's vectors in memory; ``search`` returns (ids, cosine)."""

    def __init__(self, row_columns: list[str] | None = None) -> None:
        self.row_columns = row_columns or ["chunk_id"]
        # (table name, version, matrix or None when that version is not held): one
        # tuple, so the background reload replaces it in one step.
        self._held: tuple[str | None, int | None, _Matrix | None] = (None, None, None)
        self._loading: threading.Thread | None = None

    @property
    def _matrix(self) -> _Matrix | None:
        return self._held[2]

    def usable(self, table: Any, table_name: str, version: int) -> bool:
        """Whether the vectors of ``table`` (at ``version``) are held in memory: small
        enough, no vector index, loaded. Loads what fits (the vectors and the hits'
        columns, or the columns alone within ``ROW_BUDGET_BYTES``). The first load is
        waited for; a later version of the same table (an index run) loads in the
        background while the caller reads LanceDB, so the first search after a run
        does not wait for the reload (~0.5 s at 35k chunks) and the old copy never
        answers for the new version."""
        from rag_serving.index.ann import find_vector_index

        held_name, held_version, matrix = self._held
        if (held_name, held_version) == (table_name, version):
            return matrix is not None and matrix.vectors is not None
        if self._loading is not None and self._loading.is_alive():
            return False
        rows = int(table.count_rows())
        vectors = rows <= MAX_ROWS and find_vector_index(table) is None
        if not vectors and _row_bytes(table, rows) > ROW_BUDGET_BYTES:
            self._held = (table_name, version, None)
            return False
        if matrix is None or held_name != table_name:
            self._held = (table_name, version, _load(table, version, self.row_columns, vectors))
            return vectors
        self._loading = threading.Thread(
            target=self._reload, args=(table, table_name, version, vectors), daemon=True
        )
        self._loading.start()
        return False

    def _reload(self, table: Any, table_name: str, version: int, vectors: bool) -> None:
        # On failure the next search tries again; LanceDB serves meanwhile.
        with contextlib.suppress(Exception):
            loaded = _load(table, version, self.row_columns, vectors)
            self._held = (table_name, version, loaded)

    def wait_for_reload(self, timeout: float | None = None) -> None:
        """Block until a background reload has finished (for tests and benchmarks)."""
        if self._loading is not None:
            self._loading.join(timeout)

    def search(
        self,
        query: np.ndarray,
        depth: int,
        sources: tuple[str, ...] = (),
        kinds: tuple[str, ...] = (),
    ) -> tuple[list[str], list[float]]:
        matrix = self._matrix
        assert matrix is not None and matrix.vectors is not None
        norm = float(np.linalg.norm(query))
        with _one_blas_thread():
            sims = matrix.vectors @ (query / norm if norm else query)
        mask = np.ones(len(matrix.ids), dtype=bool)
        if sources:
            mask &= np.isin(matrix.sources, list(sources))
        if kinds:
            mask &= np.isin(matrix.kinds, list(kinds))
        candidates = np.flatnonzero(mask) if (sources or kinds) else np.arange(len(sims))
        if len(candidates) == 0:
            return [], []
        scores = sims[candidates]
        take = min(depth, len(candidates))
        top = np.argpartition(-scores, take - 1)[:take]
        top = top[np.argsort(-scores[top], kind="stable")]
        rows = candidates[top]
        return [matrix.ids[i] for i in rows], [float(sims[i]) for i in rows]

    def vectors(self, chunk_ids: list[str]) -> np.ndarray | None:
        """Unit vectors of ``chunk_ids``, rows in their order (None if one is missing)."""
        matrix = self._matrix
        if matrix is None or matrix.vectors is None:
            return None
        found = [matrix.positions.get(c) for c in chunk_ids]
        return None if None in found else matrix.vectors[found]

    def rows(
        self, chunk_ids: list[str], version: int, limit: int | None = None
    ) -> dict[str, dict[str, Any]] | None:
        """The row columns of the first ``limit`` of ``chunk_ids`` at table ``version``;
        None when the copy is of another version or lacks one of them (a chunk the
        full-text index holds but this copy does not: the caller asks LanceDB, which
        drops it if it is gone)."""
        matrix = self._matrix
        if matrix is None or matrix.version != version:
            return None
        found = [matrix.positions.get(cid) for cid in chunk_ids[:limit]]
        if None in found:
            return None
        if not found:
            return {}
        taken = matrix.rows.take(found).to_pylist()
        return {row["chunk_id"]: row for row in taken}

    def column(self, chunk_ids: list[str], version: int, name: str) -> dict[str, Any] | None:
        """One column's values of ``chunk_ids`` at table ``version`` (the link prior's
        document ids: ~0.05 ms for 50, where whole rows take ~1 ms); None as ``rows``."""
        matrix = self._matrix
        if matrix is None or matrix.version != version:
            return None
        found = [matrix.positions.get(cid) for cid in chunk_ids]
        if None in found:
            return None
        values = matrix.rows.column(name).take(found).to_pylist() if found else []
        return dict(zip(chunk_ids, values, strict=True))


def _one_blas_thread() -> Any:
    """A context in which numpy's BLAS uses one thread. The scan is bound by memory,
    not arithmetic, and a second BLAS thread spins on after it, taking the core the
    next query's embedding needs: hybrid p50 at 35k chunks 20.9 → 13.7 ms with one
    (measured on the loaded machine, same process, interleaved)."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def _row_bytes(table: Any, rows: int) -> int:
    """About how many bytes the table holds besides its vectors."""
    try:
        total = int(table.stats()["total_bytes"])
        dimension = table.schema.field("vector").type.list_size
    except Exception:  # an unreadable estimate: assume it does not fit
        return ROW_BUDGET_BYTES + 1
    return total - rows * max(dimension, 0) * 4


def _load(table: Any, version: int, row_columns: list[str], with_vectors: bool = True) -> _Matrix:
    vector = ["vector"] if with_vectors else []
    columns = list(dict.fromkeys(["chunk_id", "source", "kind", *row_columns, *vector]))
    query = table.search().select(columns)
    data = query.limit(None).to_arrow()
    rows = data.num_rows
    vectors: np.ndarray | None = None
    if with_vectors and rows:
        column = data.column("vector").combine_chunks()
        flat = column.values.to_numpy(zero_copy_only=False)
        vectors = np.array(flat, dtype=np.float32).reshape(rows, -1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.where(norms == 0, 1.0, norms)
    elif with_vectors:
        vectors = np.zeros((0, 1), dtype=np.float32)
    ids = data.column("chunk_id").to_pylist()
    return _Matrix(
        # One chunk per column: a take across LanceDB's many batches costs ~9 ms.
        rows=data.select(list(dict.fromkeys(["chunk_id", *row_columns]))).combine_chunks(),
        positions={cid: i for i, cid in enumerate(ids)},
        version=version,
        ids=ids,
        vectors=vectors,
        sources=np.asarray(data.column("source").to_pylist(), dtype=object),
        kinds=np.asarray(data.column("kind").to_pylist(), dtype=object),
    )
