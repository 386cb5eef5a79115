"""One hit per document: the best chunk of each document, in fused order, with how
many more of its chunks matched among the candidates read.

A commit's message, file list and diff, or a long PDF's pages, would otherwise fill
the first page with one document. The rows are read a window at a time (twice the
hits asked for, doubled while fewer distinct documents than asked came back), so a
search whose hits are all different documents reads what it read before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rag_serving.search.fusion import FusedHit

Rows = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Collapsed:
    hits: list[FusedHit]  # at most k, each of another document
    rows: Rows  # the rows read, by chunk id
    more: dict[str, int]  # kept chunk id → further hits of its document that were read


def best_per_document(
    fused: Sequence[FusedHit], read_rows: Callable[[list[str]], Rows], k: int
) -> Collapsed:
    """The first ``k`` hits of ``fused`` from distinct documents (``read_rows`` gives
    the rows, with ``doc_id``, of chunk ids; a chunk it does not give is dropped)."""
    rows: Rows = {}
    window = 2 * k
    while True:
        missing = [hit.id for hit in fused[:window] if hit.id not in rows]
        if missing:
            rows.update(read_rows(missing))
        kept: list[FusedHit] = []
        first_of: dict[str, str] = {}  # doc id → its kept chunk id
        more: dict[str, int] = {}
        for hit in fused[:window]:
            row = rows.get(hit.id)
            if row is None:
                continue
            first = first_of.get(row["doc_id"])
            if first is not None:
                more[first] = more.get(first, 0) + 1
            elif len(kept) < k:
                first_of[row["doc_id"]] = hit.id
                kept.append(hit)
        if len(kept) >= k or window >= len(fused):
            return Collapsed(kept, rows, more)
        window *= 2
