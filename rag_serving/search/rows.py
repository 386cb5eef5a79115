"""Hit rows of a large chunks table by position, for warm processes.

Above the size the vectors are kept in memory for (rag_serving/search/vectors.py),
a search would read its hits' rows with a filtered query (``chunk_id IN (…)``):
~5-8 ms at 100k chunks, even with the BTREE index, where a take of the same rows
by their offsets costs ~1.4 ms. A warm engine keeps, per table version, only the
chunk ids in offset order (sorted, as fixed-width bytes: ~40 MB at 1M chunks) and
takes rows by offset, checking that each row is the chunk it asked for.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class RowLocator:
    """Offsets of one chunks table's rows at one version; ``rows`` takes by them."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = list(dict.fromkeys(["chunk_id", *columns]))
        self._key: tuple[str, int] | None = None
        self._sorted_ids: np.ndarray = np.array([], dtype="S1")
        self._offsets: np.ndarray = np.array([], dtype=np.int64)

    def rows(
        self, table: Any, table_name: str, version: int, chunk_ids: list[str], limit: int | None
    ) -> dict[str, dict[str, Any]] | None:
        """The rows of the first ``limit`` of ``chunk_ids`` the table holds at
        ``version``; None when a taken row is not the one asked for (the table moved
        on): the caller then reads them by a query."""
        if self._key != (table_name, version):
            self._load(table, table_name, version)
        wanted = np.array([c.encode() for c in chunk_ids], dtype=self._sorted_ids.dtype)
        slots = np.searchsorted(self._sorted_ids, wanted)
        slots = np.minimum(slots, len(self._sorted_ids) - 1)
        held = [
            (cid, int(self._offsets[slot]))
            for cid, slot, key in zip(chunk_ids, slots, wanted, strict=True)
            if len(self._sorted_ids) and self._sorted_ids[slot] == key
        ][:limit]
        if not held:
            return {}
        taken = table.take_offsets([offset for _, offset in held]).select(self.columns)
        found = {row["chunk_id"]: row for row in taken.to_arrow().to_pylist()}
        if set(found) != {cid for cid, _ in held}:
            return None
        return found

    def _load(self, table: Any, table_name: str, version: int) -> None:
        ids = table.search().select(["chunk_id"]).limit(None).to_arrow().column("chunk_id")
        encoded = np.array(ids.to_pylist(), dtype=object).astype("S")
        order = np.argsort(encoded, kind="stable")
        self._sorted_ids = encoded[order]
        self._offsets = order.astype(np.int64)
        self._key = (table_name, version)
