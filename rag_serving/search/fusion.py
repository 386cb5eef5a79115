"""Fusion of ranked lists as pure functions with an explain trace: weighted
Reciprocal Rank Fusion, and weighted sums of normalised scores (min-max or
z-score)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class RankedList:
    """One retriever's results: ids best first, with that retriever's own scores."""

    name: str
    ids: Sequence[str]
    scores: Sequence[float]
    weight: float = 1.0
    # For a retriever that scores every unlisted item ``floor`` (BM25: 0, no term
    # matched): a list shorter than ``depth`` holds every match, and the score
    # statistics of the weighted-sum fusions count the unlisted up to ``depth`` at
    # ``floor``. Without this a lone match (an exact Chinese phrase) normalises to 1
    # and is outvoted by any outlier of a full list.
    floor: float | None = None
    depth: int = 0

    def score_sample(self) -> list[float]:
        """The scores the normalisation is computed over."""
        scores = [float(s) for s in self.scores]
        if self.floor is None or len(scores) >= self.depth:
            return scores
        return scores + [self.floor] * (self.depth - len(scores))


class ListContribution(NamedTuple):
    """Where an id stood in one list and what that added to its fused score."""

    rank: int  # 1-based
    score: float  # the retriever's own score (BM25 score, cosine similarity)
    contribution: float


# Tuples, not dataclasses: a hybrid search makes ~400 of each, and a frozen
# dataclass's constructor is ~5× slower (fuse stage 0.7 ms at 35k chunks).
class FusedHit(NamedTuple):
    id: str
    score: float
    explain: dict[str, ListContribution]


def reciprocal_rank_fusion(
    lists: Sequence[RankedList], k: int = 60, limit: int | None = None
) -> list[FusedHit]:
    """Fuse ranked lists: ``score(d) = Σ weight_i / (k + rank_i(d))``.

    Ties are broken by the best single-list rank, then by id, so the output is
    deterministic. Each hit records its rank and score in every list it was in. With
    ``limit``, the best ``limit`` hits only.
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
    order = sorted(totals, key=lambda d: (-totals[d], best_rank[d], d))[:limit]
    return [FusedHit(d, totals[d], explains[d]) for d in order]


def convex_fusion(lists: Sequence[RankedList], limit: int | None = None) -> list[FusedHit]:
    """Fuse lists by a weighted sum of min-max normalised scores:
    ``score(d) = Σ_i w_i · (s_i(d) - min_i) / (max_i - min_i)`` (0 where ``d`` is not
    in list i; a list whose scores are all equal normalises to 1).

    Unlike RRF this keeps how far apart the scores are, so a confident retriever is
    not outvoted by a weak one's rank order (Bruch et al., "An Analysis of Fusion
    Functions for Hybrid Retrieval", 2023). Ties break by best rank, then id.
    """
    return _weighted_sum(lists, lambda scores: max(scores) - min(scores), limit)


def zscore_fusion(lists: Sequence[RankedList], limit: int | None = None) -> list[FusedHit]:
    """Fuse lists by a weighted sum of standardised scores:
    ``score(d) = Σ_i w_i · (s_i(d) - min_i) / σ_i`` where ``σ_i`` is the standard
    deviation of list i's scores and ``min_i`` its lowest retrieved score (so an id
    missing from list i gets that list's worst value, 0). A list whose scores are all
    equal contributes ``w_i`` to each of its ids.

    Dividing by the spread rather than the range keeps one outlying top score from
    squashing the rest of its list; measured best on average over four BEIR sets
    (docs/benchmarks.md, "Retrieval quality"). Ties break by best rank, then id.
    """
    return _weighted_sum(lists, _standard_deviation, limit)


def _standard_deviation(scores: Sequence[float]) -> float:
    mean = sum(scores) / len(scores)
    return float((sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5)


# One list's name, id → position (its first), scores and weighted contributions.
_Scored = tuple[str, dict[str, int], list[float], list[float]]


def _weighted_sum(
    lists: Sequence[RankedList], scale: Callable[[Sequence[float]], float], limit: int | None
) -> list[FusedHit]:
    """``Σ_i w_i · (s_i(d) - min_i) / scale_i`` over the lists (1 per list when
    ``scale_i`` is 0), with the explain trace; the best ``limit`` hits when given."""
    totals: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    scored: list[_Scored] = []
    for ranked in lists:
        if ranked.weight == 0 or not ranked.ids:
            continue
        scores = [float(s) for s in ranked.scores]
        sample = ranked.score_sample()
        low, spread, weight = min(sample), scale(sample), ranked.weight
        if spread > 0:
            contributions = [weight * (s - low) / spread for s in scores]
        else:
            contributions = [weight] * len(scores)
        for rank, (doc_id, contribution) in enumerate(
            zip(ranked.ids, contributions, strict=True), 1
        ):
            totals[doc_id] = totals.get(doc_id, 0.0) + contribution
            if rank < best_rank.get(doc_id, rank + 1):
                best_rank[doc_id] = rank
        positions = {doc_id: i for i, doc_id in reversed(list(enumerate(ranked.ids)))}
        scored.append((ranked.name, positions, scores, contributions))
    order = sorted(totals, key=lambda d: (-totals[d], best_rank[d], d))[:limit]
    return [FusedHit(d, totals[d], _explain(d, scored)) for d in order]


def _explain(doc_id: str, scored: list[_Scored]) -> dict[str, ListContribution]:
    out = {}
    for name, positions, scores, contributions in scored:
        i = positions.get(doc_id)
        if i is not None:
            out[name] = ListContribution(i + 1, scores[i], contributions[i])
    return out


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
