"""Retrieval metrics with the standard (trec_eval / pytrec_eval / BEIR) definitions.

Pure functions over one query: ``ranking`` is the retrieved document ids, best
first; ``qrels`` maps document ids to graded relevance (``0`` or negative = not
relevant). A document that appears more than once in a ranking counts only at its
first (best) position, so chunk-level results collapse to document level.

- ``ndcg_at_k``: DCG@k = Σ_{rank ≤ k} rel / log2(rank + 1) (linear gain, as
  pytrec_eval's ``ndcg_cut``), divided by the DCG@k of the ideal ranking (the
  judged documents sorted by relevance). Only positive relevance contributes.
- ``recall_at_k``: relevant documents in the top k / all relevant documents
  (relevance > 0).
- ``mrr_at_k``: 1 / rank of the first relevant document in the top k, else 0.

A query without any relevant document scores 0 on every metric (as trec_eval).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "dcg",
    "dedupe",
    "mean",
    "mrr_at_k",
    "ndcg_at_k",
    "ranking_from_scores",
    "recall_at_k",
]


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")


def dedupe(ranking: Iterable[str]) -> list[str]:
    """The ranking with each id kept at its first (best) position only."""
    return list(dict.fromkeys(ranking))


def ranking_from_scores(scores: Mapping[str, float]) -> list[str]:
    """Ids ordered as trec_eval orders a run: score descending, ties broken by
    document id descending (so ties never depend on input order)."""
    return [
        doc for doc, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)
    ]


def dcg(gains: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of the first ``k`` gains (rank r weighs 1/log2(r+1))."""
    _check_k(k)
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains[:k], start=1))


def ndcg_at_k(ranking: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Normalised DCG@k with graded, linear gains (0.0 when nothing is relevant)."""
    _check_k(k)
    ideal = dcg(sorted((rel for rel in qrels.values() if rel > 0), reverse=True), k)
    if ideal == 0:
        return 0.0
    gains = [max(qrels.get(doc, 0), 0) for doc in dedupe(ranking)[:k]]
    return dcg(gains, k) / ideal


def recall_at_k(ranking: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Share of the relevant documents (relevance > 0) found in the top ``k``."""
    _check_k(k)
    relevant = {doc for doc, rel in qrels.items() if rel > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(dedupe(ranking)[:k])) / len(relevant)


def mrr_at_k(ranking: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant document in the top ``k`` (0.0 if none)."""
    _check_k(k)
    for rank, doc in enumerate(dedupe(ranking)[:k], start=1):
        if qrels.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean over queries (0.0 for no queries)."""
    return sum(values) / len(values) if values else 0.0
