"""Weighted Reciprocal Rank Fusion: the maths and the explain trace."""

from __future__ import annotations

import pytest

from rag_serving.search.fusion import (
    RankedList,
    convex_fusion,
    reciprocal_rank_fusion,
    single_list,
    zscore_fusion,
)


def test_rrf_scores_follow_the_formula() -> None:
    bm25 = RankedList("bm25", ["a", "b", "c"], [9.0, 5.0, 1.0])
    vector = RankedList("vector", ["c", "a"], [0.9, 0.8])
    hits = reciprocal_rank_fusion([bm25, vector], k=60)
    scores = {h.id: h.score for h in hits}
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)
    assert [h.id for h in hits] == ["a", "c", "b"]


def test_weights_scale_each_list() -> None:
    bm25 = RankedList("bm25", ["a", "b"], [2.0, 1.0], weight=0.25)
    vector = RankedList("vector", ["b", "a"], [0.9, 0.8], weight=1.0)
    hits = reciprocal_rank_fusion([bm25, vector], k=10)
    assert [h.id for h in hits] == ["b", "a"]
    assert hits[0].score == pytest.approx(0.25 / 12 + 1 / 11)


def test_zero_weight_ignores_a_list() -> None:
    hits = reciprocal_rank_fusion(
        [RankedList("bm25", ["x"], [1.0], weight=0.0), RankedList("vector", ["y"], [0.5])], k=60
    )
    assert [h.id for h in hits] == ["y"]


def test_explain_records_rank_score_and_contribution() -> None:
    hits = reciprocal_rank_fusion(
        [RankedList("bm25", ["a", "b"], [3.0, 2.0]), RankedList("vector", ["b"], [0.7])], k=60
    )
    b = next(h for h in hits if h.id == "b")
    assert b.explain["bm25"].rank == 2 and b.explain["bm25"].score == 3.0 - 1.0
    assert b.explain["vector"].rank == 1 and b.explain["vector"].score == pytest.approx(0.7)
    assert b.explain["vector"].contribution == pytest.approx(1 / 61)
    a = next(h for h in hits if h.id == "a")
    assert set(a.explain) == {"bm25"}


def test_ties_are_deterministic() -> None:
    lists = [
        RankedList("bm25", ["b", "a"], [1.0, 1.0]),
        RankedList("vector", ["a", "b"], [1.0, 1.0]),
    ]
    first = [h.id for h in reciprocal_rank_fusion(lists)]
    assert first == [h.id for h in reciprocal_rank_fusion(list(reversed(lists)))]
    assert first == ["a", "b"]


def test_smaller_k_favours_top_ranks() -> None:
    lists = [
        RankedList("bm25", ["top", "x", "y"], [3, 2, 1]),
        RankedList("vector", ["x", "y", "top"], [3, 2, 1]),
    ]
    assert reciprocal_rank_fusion(lists, k=1)[0].id == "x"
    with pytest.raises(ValueError):
        reciprocal_rank_fusion(lists, k=0)


def test_single_list_keeps_order_and_scores() -> None:
    hits = single_list(RankedList("vector", ["p", "q"], [0.9, 0.4]))
    assert [(h.id, h.score) for h in hits] == [("p", 0.9), ("q", 0.4)]
    assert hits[1].explain["vector"].rank == 2


def test_convex_fusion_uses_normalised_scores() -> None:
    from rag_serving.search.fusion import convex_fusion

    bm25 = RankedList("bm25", ["a", "b", "c"], [10.0, 9.5, 1.0], weight=0.5)
    vector = RankedList("vector", ["c", "b", "a"], [0.9, 0.5, 0.1], weight=1.0)
    hits = {h.id: h for h in convex_fusion([bm25, vector])}
    assert hits["a"].score == pytest.approx(0.5 * 1.0 + 1.0 * 0.0)
    assert hits["b"].score == pytest.approx(0.5 * (8.5 / 9.0) + 1.0 * 0.5)
    assert hits["c"].score == pytest.approx(0.5 * 0.0 + 1.0 * 1.0)
    assert [h.id for h in convex_fusion([bm25, vector])] == ["c", "b", "a"]
    assert hits["b"].explain["bm25"].rank == 2
    assert hits["b"].explain["vector"].contribution == pytest.approx(0.5)


def test_convex_fusion_handles_flat_and_empty_lists() -> None:
    from rag_serving.search.fusion import convex_fusion

    flat = RankedList("bm25", ["x", "y"], [2.0, 2.0])
    hits = convex_fusion([flat, RankedList("vector", [], [])])
    assert [(h.id, h.score) for h in hits] == [("x", 1.0), ("y", 1.0)]


def test_zscore_fusion_divides_by_spread_and_gives_missing_ids_the_worst_value() -> None:
    from rag_serving.search.fusion import zscore_fusion

    # one outlying BM25 score: min-max would squash b and c together near 0
    bm25 = RankedList("bm25", ["a", "b", "c"], [30.0, 6.0, 3.0], weight=0.5)
    vector = RankedList("vector", ["b", "d"], [0.8, 0.6], weight=1.0)
    hits = {h.id: h for h in zscore_fusion([bm25, vector])}
    mean = 13.0
    sigma = (((30 - mean) ** 2 + (6 - mean) ** 2 + (3 - mean) ** 2) / 3) ** 0.5
    assert hits["a"].score == pytest.approx(0.5 * 27.0 / sigma)
    assert hits["b"].score == pytest.approx(0.5 * 3.0 / sigma + 1.0 * 0.2 / 0.1)
    assert hits["c"].score == pytest.approx(0.0)
    assert hits["d"].score == pytest.approx(0.0)  # worst in its only list
    assert "bm25" not in hits["d"].explain
    assert [h.id for h in zscore_fusion([bm25, vector])][:2] == ["b", "a"]
    assert hits["c"].explain["bm25"].rank == 3


def test_zscore_fusion_handles_flat_and_empty_lists() -> None:
    from rag_serving.search.fusion import zscore_fusion

    flat = RankedList("bm25", ["x", "y"], [2.0, 2.0], weight=0.3)
    hits = zscore_fusion([flat, RankedList("vector", [], [])])
    assert [(h.id, h.score) for h in hits] == [("x", 0.3), ("y", 0.3)]
    assert zscore_fusion([]) == []


def test_a_short_bm25_list_counts_its_unmatched_at_zero() -> None:
    # One exact match in a keyword list of depth 200 against a full vector list: the
    # match is far above the (unlisted, zero-scored) rest, not a neutral 1.
    vector = RankedList(
        "vector", [f"v{i}" for i in range(200)], [0.4 - i / 1000 for i in range(200)]
    )
    alone = RankedList("bm25", ["match"], [19.0], 0.3)
    padded = RankedList("bm25", ["match"], [19.0], 0.3, floor=0.0, depth=200)
    assert zscore_fusion([alone, vector])[0].id == "v0"
    assert zscore_fusion([padded, vector])[0].id == "match"
    convex = {hit.id: hit for hit in convex_fusion([padded, vector])}
    assert convex["match"].explain["bm25"].contribution == pytest.approx(0.3)  # (19 - 0) / 19
    # A full list is normalised over its own scores, as before.
    full = RankedList("bm25", ["a", "b"], [3.0, 1.0], 1.0, floor=0.0, depth=2)
    assert full.score_sample() == [3.0, 1.0]


def test_a_query_in_a_script_the_embedder_does_not_know_lets_keywords_lead() -> None:
    from rag_serving.config import SearchWeights
    from rag_serving.search.weights import list_weights

    weights = SearchWeights(bm25=0.3, vector=1.0)
    assert list_weights("how are results fused", weights, multilingual=False) == (0.3, 1.0)
    assert list_weights("农历节气", weights, multilingual=False) == (1.0, 0.3)
    assert list_weights("الكتاب", weights, multilingual=False) == (1.0, 0.3)
    assert list_weights("農暦 calendar plugin", weights, multilingual=False) == (0.3, 1.0)
    assert list_weights("农历节气", weights, multilingual=True) == (0.3, 1.0)
