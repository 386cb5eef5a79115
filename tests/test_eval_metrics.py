"""nDCG@k, recall@k and MRR@k on hand-computed examples (trec_eval definitions)."""

from __future__ import annotations

import math

import pytest

from rag_serving.evaluation.metrics import (
    dcg,
    dedupe,
    mean,
    mrr_at_k,
    ndcg_at_k,
    ranking_from_scores,
    recall_at_k,
)

LOG2_3 = math.log2(3)  # the discount of rank 2


def test_dcg_discounts_rank_r_by_log2_r_plus_1() -> None:
    # 3/1 + 2/log2(3) + 1/2
    assert dcg([3, 2, 1], 3) == pytest.approx(3 + 2 / LOG2_3 + 0.5)
    assert dcg([3, 2, 1], 1) == 3
    assert dcg([], 5) == 0


def test_ndcg_uses_graded_linear_gains() -> None:
    qrels = {"a": 3, "b": 2, "c": 1}
    # ranking b, x, a: DCG = 2/1 + 0 + 3/log2(4) = 3.5; ideal a, b, c = 3 + 2/log2(3) + 1/2
    assert ndcg_at_k(["b", "x", "a"], qrels, 3) == pytest.approx(3.5 / (3.5 + 2 / LOG2_3))
    assert ndcg_at_k(["b", "x", "a"], qrels, 3) == pytest.approx(0.735007, abs=1e-6)
    # at k=1: 2 / 3
    assert ndcg_at_k(["b", "x", "a"], qrels, 1) == pytest.approx(2 / 3)
    assert ndcg_at_k(["a", "b", "c"], qrels, 3) == pytest.approx(1.0)


def test_ndcg_grades_matter_not_just_relevance() -> None:
    qrels = {"a": 3, "c": 1}
    # c first, a second: (1 + 3/log2(3)) / (3 + 1/log2(3))
    assert ndcg_at_k(["c", "a"], qrels, 10) == pytest.approx((1 + 3 / LOG2_3) / (3 + 1 / LOG2_3))
    assert ndcg_at_k(["c", "a"], qrels, 10) == pytest.approx(0.796708, abs=1e-6)
    # with binary judgements the same order would be perfect
    assert ndcg_at_k(["c", "a"], {"a": 1, "c": 1}, 10) == pytest.approx(1.0)


def test_ndcg_ideal_comes_from_the_qrels_cut_at_k() -> None:
    qrels = {"a": 1, "b": 1, "c": 1}  # b and c were never retrieved
    assert ndcg_at_k(["a"], qrels, 1) == pytest.approx(1.0)
    assert ndcg_at_k(["a"], qrels, 3) == pytest.approx(1 / (1 + 1 / LOG2_3 + 0.5))
    assert ndcg_at_k(["a"], qrels, 3) == pytest.approx(0.469279, abs=1e-6)


def test_ties_in_the_ideal_ranking_do_not_change_the_score() -> None:
    qrels = {"a": 2, "b": 2, "c": 1}
    assert ndcg_at_k(["a", "b", "c"], qrels, 3) == pytest.approx(1.0)
    assert ndcg_at_k(["b", "a", "c"], qrels, 3) == pytest.approx(1.0)


def test_tied_scores_are_ordered_as_trec_eval_orders_them() -> None:
    # score descending, then document id descending
    assert ranking_from_scores({"a": 1.0, "b": 1.0, "c": 2.0, "d": 0.5}) == ["c", "b", "a", "d"]
    qrels = {"a": 1}
    ranking = ranking_from_scores({"a": 1.0, "b": 1.0})
    assert mrr_at_k(ranking, qrels, 10) == 0.5
    assert ndcg_at_k(ranking, qrels, 10) == pytest.approx(1 / LOG2_3)


def test_a_document_counts_once_at_its_best_rank() -> None:
    # several chunks of "a" collapse to rank 1; "b" moves up to rank 2
    assert dedupe(["a", "a", "b", "a"]) == ["a", "b"]
    qrels = {"b": 1}
    assert mrr_at_k(["a", "a", "b"], qrels, 10) == 0.5
    assert mrr_at_k(["a", "a", "b"], qrels, 2) == 0.5
    assert ndcg_at_k(["a", "a", "b"], qrels, 2) == pytest.approx(1 / LOG2_3)
    assert recall_at_k(["b", "b"], {"b": 1, "c": 1}, 10) == 0.5


def test_recall_at_k_cut_offs() -> None:
    qrels = {"r1": 1, "r2": 2, "r3": 1, "n": 0}
    ranking = ["r1", "x1", "x2", "r2"] + [f"y{i}" for i in range(6)] + ["r3"]  # ranks 1, 4, 11
    assert recall_at_k(ranking, qrels, 3) == pytest.approx(1 / 3)
    assert recall_at_k(ranking, qrels, 4) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, qrels, 10) == pytest.approx(2 / 3)
    assert recall_at_k(ranking, qrels, 11) == 1.0
    assert recall_at_k(ranking, qrels, 100) == 1.0
    assert recall_at_k(["n"], qrels, 10) == 0.0  # score 0 is judged non-relevant


def test_mrr_at_k_cut_offs() -> None:
    qrels = {"r": 1}
    ranking = ["x", "y", "z", "r"]
    assert mrr_at_k(ranking, qrels, 3) == 0.0
    assert mrr_at_k(ranking, qrels, 4) == 0.25
    assert mrr_at_k(ranking, qrels, 10) == 0.25
    # only the first relevant document counts, whatever its grade
    assert mrr_at_k(["a", "b"], {"a": 1, "b": 3}, 10) == 1.0


def test_ndcg_at_k_ignores_what_lies_below_k() -> None:
    qrels = {"r": 2}
    ranking = [f"x{i}" for i in range(10)] + ["r"]
    assert ndcg_at_k(ranking, qrels, 10) == 0.0
    assert ndcg_at_k(ranking, qrels, 11) == pytest.approx(1 / math.log2(12))


@pytest.mark.parametrize("qrels", [{}, {"a": 0}, {"a": -1, "b": 0}])
def test_no_relevant_documents_scores_zero(qrels: dict[str, int]) -> None:
    for metric in (ndcg_at_k, recall_at_k, mrr_at_k):
        assert metric(["a", "b"], qrels, 10) == 0.0
        assert metric([], qrels, 10) == 0.0


def test_negative_judgements_give_no_gain() -> None:
    qrels = {"bad": -1, "good": 1}
    assert ndcg_at_k(["bad", "good"], qrels, 10) == pytest.approx(1 / LOG2_3)
    assert mrr_at_k(["bad", "good"], qrels, 10) == 0.5
    assert recall_at_k(["bad", "good"], qrels, 10) == 1.0


def test_empty_ranking_and_invalid_k() -> None:
    assert ndcg_at_k([], {"a": 1}, 10) == 0.0
    assert recall_at_k([], {"a": 1}, 10) == 0.0
    assert mrr_at_k([], {"a": 1}, 10) == 0.0
    for metric in (ndcg_at_k, recall_at_k, mrr_at_k):
        with pytest.raises(ValueError, match="k must be at least 1"):
            metric(["a"], {"a": 1}, 0)


def test_mean_over_queries() -> None:
    assert mean([1.0, 0.5, 0.0]) == 0.5
    assert mean([]) == 0.0
