"""Indexes that keep a generation's chunks table fast to search as it grows.

Below the thresholds every search is a brute-force scan, which is exact and fast
enough. Past them ``ensure_search_indexes`` creates (and later keeps current):

- **BTREE scalar indexes** on ``chunk_id``, ``doc_id`` and ``source`` (and on
  ``files.doc_id``): search reads its hits back with ``chunk_id IN (...)`` and
  their files with ``doc_id IN (...)``, the embed stage deletes by ``doc_id``,
  filters select by ``source``; without an index each of those is a full scan.
- **An IVF_SQ vector index** (cosine) on ``vector``: flat search reads every
  vector, which costs ~60–100 ms per query at 100k chunks and ~0.6 s at 1M on
  two cores.

Rows written after an index was built are not in it: LanceDB still finds them
(it scans unindexed rows exactly, beside the index) until ``table.optimize()``
folds them in. The vector index is retrained when the table has grown (or shrunk)
by ``RETRAIN_GROWTH`` since it was trained, because its partitions were sized for
the old row count. An index that cannot be built never fails the caller: the
error is logged and reported, and search keeps working without it.

The thresholds and parameters are measured by ``benchmarks/scale_latency.py``
(docs/architecture.md, "Scale: vector and scalar indexes").
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from rag_serving.index.store import IndexStore

log = logging.getLogger(__name__)

# Rows at which BTREE indexes are created (measured on two shared cores, see
# docs/architecture.md): reading 20 hits back by `chunk_id IN (...)` takes 4 ms
# with or without an index at 10k chunks, but 8.6 → 4.2 ms at 20k, 12 → 6 ms at
# 100k and 71 → 12 ms at 1M; `files` by `doc_id IN (...)` 17 → 3 ms at 250k files.
# Building one takes < 1 s even at 1M rows and merge_insert is no slower with it.
SCALAR_INDEX_MIN_ROWS = 20_000
# chunk_id: search reads hits back by it; doc_id: the embed stage deletes and reads
# by it; source: a source filter (prefilter) is 2–3x faster with it at 1M chunks.
SCALAR_COLUMNS: tuple[str, ...] = ("chunk_id", "doc_id", "source")
# Other tables read by key on the query path: the staleness check reads `files`.
OTHER_SCALAR_INDEXES: dict[str, tuple[str, ...]] = {"files": ("doc_id",)}

# Chunks at which the vector index is created. Flat cosine top-200 (p50, two
# shared cores): 11 ms at 10k, 18 ms at 20–30k, 56 ms at 50k, 64–100 ms at 100k,
# 640 ms at 1M — past ~50k it is most of a query's time (a whole hybrid query at
# 35k chunks takes ~60 ms). With the index: 7 ms at 50k, 10 ms at 100k, 13 ms at
# 1M, recall@10 ≥ 0.98 against exact search; it builds in 1 s at 50k, 4 s at 100k
# and 26–42 s at 1M. Through SearchEngine (p50): vector search 136 → 35 ms at 100k,
# 642 → 52 ms at 1M; hybrid 741 → 91 ms at 1M (benchmarks/scale_latency.py).
VECTOR_INDEX_MIN_ROWS = 50_000
VECTOR_COLUMN = "vector"
# IVF_SQ (8-bit scalar quantisation), chosen over IVF_PQ and IVF_HNSW_SQ: at 100k
# chunks IVF_PQ took 110–210 s to build (PQ codebook training) and needed
# refine to pass recall 0.95; IVF_HNSW_SQ took 50–80 s; IVF_SQ took 4–10 s with
# recall@10 0.95–0.99 before re-ranking (1.0 after).
# Rows per IVF partition (num_partitions = rows / this, at least MIN_PARTITIONS).
# sqrt(rows) partitions (1,000 at 1M) make k-means cost grow with rows^1.5: at 1M
# they trained in 83 s against 32 s for 244 partitions, and were no more accurate
# (recall@10 0.982 against 0.992 at 40 probes).
TARGET_PARTITION_ROWS = 4096
MIN_PARTITIONS = 16
# Retrain once the row count is this many times the trained one (or 1/this).
RETRAIN_GROWTH = 2.0
# Fold rows written since the last build into the indexes (``optimize``) once this
# many are unindexed; until then LanceDB scans them exactly beside the index.
FOLD_UNINDEXED_ROWS = 20_000
# Search parameters: probe this share of the partitions (at least MIN_NPROBES),
# then re-rank the candidates with the full vectors (exact distances and order).
# At 1M chunks, 37 of 244 partitions: recall@10 0.985–0.99, 13 ms bare.
NPROBE_SHARE = 0.15
MIN_NPROBES = 20
REFINE_FACTOR = 1

_VECTOR_NAME = re.compile(r"^vector_idx_r(\d+)_p(\d+)$")


@dataclass(frozen=True)
class VectorIndex:
    """The vector index of a table, as recorded in its name."""

    name: str
    trained_rows: int  # row count when it was trained
    partitions: int

    @property
    def nprobes(self) -> int:
        """Partitions to search per query for recall@10 ≥ 0.95 (measured)."""
        return min(self.partitions, max(MIN_NPROBES, math.ceil(self.partitions * NPROBE_SHARE)))


def vector_index_name(trained_rows: int, partitions: int) -> str:
    return f"vector_idx_r{trained_rows}_p{partitions}"


def num_partitions(rows: int) -> int:
    """IVF partitions for a table of ``rows`` rows (never more than rows)."""
    return max(1, min(rows, max(MIN_PARTITIONS, round(rows / TARGET_PARTITION_ROWS))))


def _vector_indices(indices: list[Any]) -> list[Any]:
    return [ix for ix in indices if list(ix.columns) == [VECTOR_COLUMN]]


def find_vector_index(table: Any) -> VectorIndex | None:
    """The table's vector index (None when it has none, or on any error)."""
    try:
        found = _vector_indices(list(table.list_indices()))
    except Exception:  # an unreadable index list must never break a search
        return None
    # During a retrain the new and the old index exist for a moment: take the newest.
    found.sort(key=lambda ix: str(getattr(ix, "created_at", "") or ""), reverse=True)
    for ix in found:
        match = _VECTOR_NAME.match(ix.name)
        if match:
            return VectorIndex(ix.name, int(match.group(1)), int(match.group(2)))
    if found:  # made by hand: assume the default partitioning of its rows
        rows = int(found[0].num_indexed_rows or 0)
        return VectorIndex(found[0].name, rows, num_partitions(rows))
    return None


def ensure_search_indexes(
    store: IndexStore,
    table_name: str,
    *,
    scalar_min_rows: int | None = None,
    vector_min_rows: int | None = None,
    fold_unindexed_rows: int | None = None,
    retrain_growth: float | None = None,
) -> dict[str, Any]:
    """Create, refresh or retrain the scalar and vector indexes of chunks table
    ``table_name`` for its current size (thresholds default to this module's
    constants). Never raises: failures are logged and listed under ``errors`` in the
    returned report (plain values, for Dagster metadata)."""
    scalar_min_rows = SCALAR_INDEX_MIN_ROWS if scalar_min_rows is None else scalar_min_rows
    vector_min_rows = VECTOR_INDEX_MIN_ROWS if vector_min_rows is None else vector_min_rows
    if fold_unindexed_rows is None:
        fold_unindexed_rows = FOLD_UNINDEXED_ROWS
    retrain_growth = RETRAIN_GROWTH if retrain_growth is None else retrain_growth
    started = time.perf_counter()
    report: dict[str, Any] = {
        "table": table_name, "rows": 0, "vector_index": "none (flat search)",
        "vector_partitions": 0, "unindexed_rows": 0, "optimized": False,
        "actions": [], "errors": [],
    }  # fmt: skip
    try:
        _ensure(store, table_name, report, scalar_min_rows, vector_min_rows,
                fold_unindexed_rows, retrain_growth)  # fmt: skip
    except Exception as exc:
        _failed(report, "index maintenance", exc)
    report["seconds"] = round(time.perf_counter() - started, 2)
    report["actions"] = ", ".join(report["actions"]) or "none"
    report["errors"] = "; ".join(report["errors"]) or "none"
    return report


def _ensure(
    store: IndexStore,
    table_name: str,
    report: dict[str, Any],
    scalar_min_rows: int,
    vector_min_rows: int,
    fold_unindexed_rows: int,
    retrain_growth: float,
) -> None:
    if not store.table_exists(table_name):
        report["vector_index"] = "no table"
        return
    table = store.table(table_name)
    rows = int(table.count_rows())
    report["rows"] = rows
    indices = list(table.list_indices())

    if rows >= scalar_min_rows:
        _ensure_btrees(table, indices, SCALAR_COLUMNS, report)
    for other, columns in OTHER_SCALAR_INDEXES.items():
        if store.table_exists(other) and store.count(other) >= scalar_min_rows:
            other_table = store.table(other)
            _ensure_btrees(other_table, list(other_table.list_indices()), columns, report, other)

    current = find_vector_index(table)
    stale = _vector_indices(indices)
    if rows >= vector_min_rows:
        grown = current is not None and not (
            current.trained_rows / retrain_growth < rows < current.trained_rows * retrain_growth
        )
        if current is None or grown:
            action = "created" if current is None else "retrained"
            name = _build(report, "vector", lambda: _create_vector(table, rows))
            if name is not None:
                report["vector_index"] = action
                current = find_vector_index(table)
                for old in stale:  # the new index replaced these (after it was built)
                    if old.name != name:
                        _drop(table, old.name, report)
        else:
            report["vector_index"] = "kept"
    elif current is not None and rows < vector_min_rows // 2:
        for old in stale:  # flat search is exact and fast again
            _drop(table, old.name, report)
        report["vector_index"] = "dropped"
        current = None
    else:
        report["vector_index"] = "kept" if current else "none (flat search)"
    report["vector_partitions"] = current.partitions if current is not None else 0

    unindexed = _unindexed_rows(table)
    if unindexed >= fold_unindexed_rows and _build(report, "optimize", table.optimize):
        report["optimized"] = True
        unindexed = _unindexed_rows(table)
    report["unindexed_rows"] = unindexed


def _ensure_btrees(
    table: Any, indices: list[Any], columns: tuple[str, ...], report: dict[str, Any],
    prefix: str = "",
) -> None:  # fmt: skip
    indexed = {ix.columns[0] for ix in indices if len(ix.columns) == 1}
    for column in columns:
        if column not in indexed:
            what = f"btree {prefix + '.' if prefix else ''}{column}"
            _build(report, what, lambda c=column: _create_btree(table, c))


def _create_btree(table: Any, column: str) -> str:
    from lancedb.index import BTree

    name = f"{column}_idx"
    table.create_index(column, config=BTree(), name=name, replace=True)
    return name


def _create_vector(table: Any, rows: int) -> str:
    from lancedb.index import IvfSq

    partitions = num_partitions(rows)
    name = vector_index_name(rows, partitions)
    config = IvfSq(distance_type="cosine", num_partitions=partitions)
    table.create_index(VECTOR_COLUMN, config=config, name=name, replace=True)
    return name


def _build(report: dict[str, Any], what: str, action: Any) -> Any:
    """Run ``action``, timing it; on failure log and record it and return None."""
    started = time.perf_counter()
    try:
        result = action()
    except Exception as exc:
        _failed(report, what, exc)
        return None
    seconds = round(time.perf_counter() - started, 2)
    report["actions"].append(f"{what} ({seconds} s)")
    return result if result is not None else what


def _drop(table: Any, name: str, report: dict[str, Any]) -> None:
    try:
        table.drop_index(name)
    except Exception as exc:
        _failed(report, f"drop {name}", exc)


def _unindexed_rows(table: Any) -> int:
    """The most rows any index of ``table`` is missing."""
    worst = 0
    for ix in table.list_indices():
        stats = table.index_stats(ix.name)
        if stats is not None:
            worst = max(worst, int(stats.num_unindexed_rows))
    return worst


def _failed(report: dict[str, Any], what: str, exc: BaseException) -> None:
    log.warning("%s: %s failed: %s (search still works, unindexed)", report["table"], what, exc)
    report["errors"].append(f"{what}: {exc}")
