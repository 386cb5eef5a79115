"""Retrieval evaluation: BEIR-layout datasets and the standard metrics.

Pure code (no index, no Dagster): ``ragline eval`` builds the index and runs the
queries, this package loads the data and scores the rankings.
"""

from __future__ import annotations

from rag_serving.evaluation.beir import (
    BeirDataset,
    BeirDocument,
    DatasetError,
    available_splits,
    load_beir,
)
from rag_serving.evaluation.metrics import (
    dedupe,
    mean,
    mrr_at_k,
    ndcg_at_k,
    ranking_from_scores,
    recall_at_k,
)

__all__ = [
    "BeirDataset",
    "BeirDocument",
    "DatasetError",
    "available_splits",
    "dedupe",
    "load_beir",
    "mean",
    "mrr_at_k",
    "ndcg_at_k",
    "ranking_from_scores",
    "recall_at_k",
]
