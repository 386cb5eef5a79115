"""Fusion of ranked lists as pure functions with an explain trace: weighted
Reciprocal Rank Fusion and a convex combination of normalised scores."""

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


def convex_fusion(lists: Sequence[RankedList]) -> list[FusedHit]:
    """Fuse lists by a weighted sum of min-max normalised scores:
    ``score(d) = Σ_i w_i · (s_i(d) - min_i) / (max_i - min_i)`` (0 where ``d`` is not
    in list i; a list whose scores are all equal normalises to 1).

    Unlike RRF this keeps how far apart the scores are, so a confident retriever is
    not outvoted by a weak one's rank order (Bruch et al., "An Analysis of Fusion
    Functions for Hybrid Retrieval", 2023). Ties break by best rank, then id.
    """
    totals: dict[str, float] = {}
    explains: dict[str, dict[str, ListContribution]] = {}
    for ranked in lists:
        if ranked.weight == 0 or not ranked.ids:
            continue
        low, high = min(ranked.scores), max(ranked.scores)
        span = high - low
        for position, (doc_id, score) in enumerate(zip(ranked.ids, ranked.scores, strict=True)):
            normalised = (score - low) / span if span > 0 else 1.0
            contribution = ranked.weight * normalised
            totals[doc_id] = totals.get(doc_id, 0.0) + contribution
            explains.setdefault(doc_id, {})[ranked.name] = ListContribution(
                position + 1, float(score), contribution
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
