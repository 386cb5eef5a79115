"""Running the queries in each mode and scoring the ranks."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_serving.search import SearchEngine

from rag_serving.evaluation.self_eval.headings import Section, section_lines
from rag_serving.evaluation.self_eval.params import QUERY_TYPES, SEARCH_DEPTH, K
from rag_serving.evaluation.self_eval.queries import SelfQuery


@dataclass
class Scores:
    """Mean MRR@10 and hit@10 of a group of queries."""

    mrr: float = 0.0
    hit: float = 0.0
    queries: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            f"mrr@{K}": round(self.mrr, 6),
            f"hit@{K}": round(self.hit, 6),
            "queries": self.queries,
        }


def _mean(ranks: list[int | None]) -> Scores:
    if not ranks:
        return Scores()
    mrr = sum(1.0 / r for r in ranks if r is not None) / len(ranks)
    hit = sum(1 for r in ranks if r is not None) / len(ranks)
    return Scores(mrr, hit, len(ranks))


def rank_of(
    query: SelfQuery, hits: Sequence[Any], lines: tuple[int, int] | None = None
) -> int | None:
    """1-based rank of the answer among the first ``K`` distinct documents (sections
    for a heading query, whose ``lines`` a relevant chunk overlaps) of ``hits``; None
    when it is not among them."""
    units: set[tuple[str, str]] = set()
    for hit in hits:
        if query.origin is not None and hit.doc_id == query.origin:
            continue
        unit = (hit.doc_id, hit.anchor if query.type == "heading" else "")
        if unit not in units:
            units.add(unit)
            if len(units) > K:
                return None
        if hit.doc_id != query.doc_id:
            continue
        if query.type != "heading":
            return len(units)
        if lines is not None and hit.line_start <= lines[1] and hit.line_end >= lines[0]:
            return len(units)
    return None


@dataclass
class ModeResult:
    mode: str
    splits: dict[str, Scores]  # heldout, tuning
    by_type: dict[str, dict[str, Scores]]  # split → type → scores
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {
            split: {
                **self.splits[split].as_json(),
                "by_type": {t: s.as_json() for t, s in self.by_type[split].items()},
            }
            for split in ("heldout", "tuning")
        }


def run_queries(
    engine: SearchEngine,
    queries: Sequence[SelfQuery],
    modes: Sequence[str],
    sources: Sequence[str],
    sections: dict[str, list[Section]],
    on_query: Callable[[str], None] | None = None,
) -> list[ModeResult]:
    """Run every query in every mode and score it (``sections``: each document's
    sections now, where heading queries find their answer)."""
    from rag_serving.search import SearchFilters

    filters = SearchFilters(sources=tuple(sources))
    results = []
    for mode in modes:
        started = time.perf_counter()
        ranks: dict[str, dict[str, list[int | None]]] = {
            s: defaultdict(list) for s in ("heldout", "tuning")
        }
        for query in queries:
            hits = engine.search(query.query, k=SEARCH_DEPTH, filters=filters, mode=mode).hits  # type: ignore[arg-type]
            lines = section_lines(query, sections) if query.type == "heading" else None
            ranks[query.split][query.type].append(rank_of(query, hits, lines))
            if on_query is not None:
                on_query(mode)
        splits = {s: _mean([r for rs in ranks[s].values() for r in rs]) for s in ranks}
        by_type = {s: {t: _mean(ranks[s][t]) for t in QUERY_TYPES if ranks[s][t]} for s in ranks}
        results.append(ModeResult(mode, splits, by_type, time.perf_counter() - started))
    return results
