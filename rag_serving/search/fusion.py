"""Weighted Reciprocal Rank Fusion, as a pure function with an explain trace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RankedList:
    """One retriever's results: ids best first, with that retriever's own scores."""

    name: str
    ids: Sequence[str]
    scores: Sequence[float]
    weight: float = 1.0


@dataclass(frozen=True)
class ListContribution:
    """Where an id stood in one list and what that added to its fused score."""

    rank: int  # 1-based
    score: float  # the retriever's own score (BM25 score, cosine similarity)
    contribution: float


@dataclass(frozen=True)
class FusedHit:
    id: str
    score: float
    explain: dict[str, ListContribution] = field(default_factory=dict)


def reciprocal_rank_fusion(lists: Sequence[RankedList], k: int = 60) -> list[FusedHit]:
    """Fuse ranked lists: ``score(d) = Σ weight_i / (k + rank_i(d))``.

    Ties are broken by the best single-list rank, then by id, so the output is
    deterministic. Each hit records its rank and score in every list it was in.
    """
    if k < 1:
        raise ValueError(f"RRF k must be >= 1, got {k}")
    totals: dict[str, float] = {}
    explains: dict[str, dict[str, ListContribution]] = {}
    for ranked in lists:
        if ranked.weight == 0:
            continue
        for position, (doc_id, score) in enumerate(zip(ranked.ids, ranked.scores, strict=True)):
            rank = position + 1
            contribution = ranked.weight / (k + rank)
            totals[doc_id] = totals.get(doc_id, 0.0) + contribution
            explains.setdefault(doc_id, {})[ranked.name] = ListContribution(
                rank, float(score), contribution
            )
    best_rank = {d: min(c.rank for c in e.values()) for d, e in explains.items()}
    order = sorted(totals, key=lambda d: (-totals[d], best_rank[d], d))
    return [FusedHit(d, totals[d], explains[d]) for d in order]


def single_list(ranked: RankedList) -> list[FusedHit]:
    """Hits of one retriever in its own order, scored by its own scores."""
    return [
        FusedHit(d, float(s), {ranked.name: ListContribution(i + 1, float(s), float(s))})
        for i, (d, s) in enumerate(zip(ranked.ids, ranked.scores, strict=True))
    ]


def explain_as_dict(explain: Mapping[str, ListContribution]) -> dict[str, dict[str, float]]:
    return {
        name: {"rank": c.rank, "score": c.score, "contribution": c.contribution}
        for name, c in explain.items()
    }
