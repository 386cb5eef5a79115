"""Pseudo-relevance feedback on the query vector, on vectors of the bundled model."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from rag_serving.config import SentenceTransformersConfig
from rag_serving.embedders import create_embedder
from rag_serving.search.feedback import (
    FeedbackSettings,
    feedback_vector,
    feedback_weights,
    rescored_list,
)
from rag_serving.search.fusion import FusedHit, RankedList, zscore_fusion
from rag_sources.errors import ConfigError

TECH = {
    "iphone": "Apple released a new iPhone with a faster chip",
    "ios": "Apple ships an iOS update for iPads",
    "macbook": "Apple updates the MacBook laptop line",
}
FRUIT = {
    "orchard": "The apple orchard harvest brings crates of red fruit",
    "pie": "Baking an apple pie with a cinnamon fruit filling",
    "cider": "Pressing fresh apple cider from fallen fruit",
}


@pytest.fixture(scope="module")
def space() -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The query "apple" and the six texts' vectors, from the bundled model."""
    embedder = create_embedder(SentenceTransformersConfig())
    texts = {**TECH, **FRUIT}
    vectors = embedder.embed_documents(list(texts.values()))
    return embedder.embed_query("apple"), dict(zip(texts, vectors, strict=True))


def rows(vectors: dict[str, np.ndarray], ids: Sequence[str]) -> np.ndarray:
    return np.stack([vectors[i] for i in ids])


def vector_list(query: np.ndarray, vectors: dict[str, np.ndarray]) -> RankedList:
    ranked = sorted(vectors, key=lambda i: -float(vectors[i] @ query))
    return RankedList("vector", ranked, [float(vectors[i] @ query) for i in ranked], 1.0)


def test_the_query_moves_toward_the_fed_back_hit(space) -> None:
    query, vectors = space
    before = vector_list(query, vectors)
    assert before.ids[0] == "iphone"  # the bare word leans to the company
    moved = feedback_vector(query, np.stack([vectors["orchard"]]), [2.0], FeedbackSettings())
    assert abs(float(np.linalg.norm(moved)) - 1.0) < 1e-5
    unit = query / np.linalg.norm(query)
    assert float(moved @ vectors["orchard"]) > float(unit @ vectors["orchard"]) + 0.1
    assert float(moved @ unit) > 0.9  # weight 0.3: still mostly the query


def test_weight_zero_and_no_hits_leave_the_query_as_it_was(space) -> None:
    query, vectors = space
    unit = query / np.linalg.norm(query)
    off = FeedbackSettings(weight=0.0)
    assert np.allclose(feedback_vector(query, np.stack([vectors["pie"]]), [1.0], off), unit)
    empty = np.zeros((0, query.shape[0]), dtype=np.float32)
    assert np.allclose(feedback_vector(query, empty, [], FeedbackSettings()), unit)


def test_a_hit_far_below_the_first_counts_little(space) -> None:
    query, vectors = space
    hits = np.stack([vectors["orchard"], vectors["macbook"]])
    weights = feedback_weights([4.0, -16.0], temperature=1.0)
    assert weights[0] == 1.0 and weights[1] < 1e-8
    both = feedback_vector(query, hits, [4.0, -16.0], FeedbackSettings(top=2))
    first = feedback_vector(query, hits[:1], [4.0], FeedbackSettings(top=1))
    assert float(both @ first) > 0.99999
    equal = feedback_vector(query, hits, [4.0, 4.0], FeedbackSettings(top=2))
    assert float(equal @ vectors["macbook"]) > float(both @ vectors["macbook"]) + 0.05


def test_rescored_list_reorders_only_the_candidates(space) -> None:
    query, vectors = space
    before = vector_list(query, vectors)
    fused = [FusedHit("orchard", 3.0, {}), FusedHit("pie", 2.5, {}), FusedHit("iphone", 0.2, {})]
    strong = rescored_list(
        before, rows(vectors, before.ids), fused, query, FeedbackSettings(weight=1.0)
    )
    assert strong is not None
    assert set(strong.ids) == set(before.ids) and len(strong.ids) == len(before.ids)
    assert list(strong.scores) == sorted(strong.scores, reverse=True)
    assert set(strong.ids[:3]) == set(FRUIT)  # every fruit text now above the company
    assert (strong.name, strong.weight, strong.floor, strong.depth) == (
        before.name, before.weight, before.floor, before.depth,
    )  # fmt: skip
    default = rescored_list(before, rows(vectors, before.ids), fused, query, FeedbackSettings())
    assert default is not None

    def fruit_rank(ranked: RankedList) -> float:
        return float(np.mean([list(ranked.ids).index(i) for i in FRUIT]))

    assert fruit_rank(default) < fruit_rank(before)


def test_rescored_list_fuses_again(space) -> None:
    query, vectors = space
    before = vector_list(query, vectors)
    bm25 = RankedList("bm25", ["pie", "cider"], [7.0, 6.0], 0.3, floor=0.0, depth=6)
    first = zscore_fusion([bm25, before])
    rescored = rescored_list(before, rows(vectors, before.ids), first, query, FeedbackSettings())
    assert rescored is not None
    second = zscore_fusion([bm25, rescored])
    assert {h.id for h in second} == {h.id for h in first}
    assert [h.id for h in second].index("cider") < [h.id for h in first].index("cider")


def test_nothing_to_feed_back_gives_none(space) -> None:
    query, vectors = space
    before = vector_list(query, vectors)
    candidates = rows(vectors, before.ids)
    settings = FeedbackSettings()
    assert rescored_list(before, candidates, [], query, settings) is None
    only_bm25 = [FusedHit("a chunk only BM25 found", 9.0, {})]
    assert rescored_list(before, candidates, only_bm25, query, settings) is None
    fused = [FusedHit("orchard", 1.0, {})]
    off = FeedbackSettings(weight=0)
    assert rescored_list(before, candidates, fused, query, off) is None
    empty = RankedList("vector", [], [], 1.0)
    none = np.zeros((0, query.shape[0]), dtype=np.float32)
    assert rescored_list(empty, none, fused, query, settings) is None


def test_only_fused_hits_among_the_candidates_are_fed_back(space) -> None:
    """A BM25-only hit in the fused top is passed over, not looked up: the result is
    that of feeding back the candidates among the top alone."""
    query, vectors = space
    before = vector_list(query, vectors)
    candidates = rows(vectors, before.ids)
    settings = FeedbackSettings(top=2, weight=1.0)
    mixed = [FusedHit("bm25 only", 5.0, {}), FusedHit("pie", 4.0, {}), FusedHit("iphone", 3.9, {})]
    alone = [FusedHit("pie", 4.0, {})]
    got = rescored_list(before, candidates, mixed, query, settings)
    want = rescored_list(before, candidates, alone, query, settings)
    assert got is not None and want is not None
    assert list(got.ids) == list(want.ids) and np.allclose(got.scores, want.scores)
    assert got.ids[0] == "pie"  # not "iphone": only the first two fused hits count
    with pytest.raises(ValueError, match="5 candidate vectors for 6 ids"):
        rescored_list(before, candidates[:5], alone, query, settings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"top": 0}, "top must be at least 1, got 0"),
        ({"weight": -0.5}, "weight must be between 0 and 10, got -0.5"),
        ({"weight": float("nan")}, "weight must be between 0 and 10, got nan"),
        ({"temperature": 0.0}, "temperature must be above 0, got 0.0"),
    ],
)
def test_bad_settings_are_a_clear_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        FeedbackSettings(**kwargs)


def test_mismatched_shapes_are_refused(space) -> None:
    query, vectors = space
    with pytest.raises(ValueError, match="differ"):
        feedback_vector(query[:10], np.stack([vectors["pie"]]), [1.0], FeedbackSettings())
    with pytest.raises(ValueError, match="1 hit vectors but 2 scores"):
        feedback_vector(query, np.stack([vectors["pie"]]), [1.0, 2.0], FeedbackSettings())


# ---- in the engine, on the real sample index ------------------------------------------


def _with_feedback(config, **settings):  # type: ignore[no-untyped-def]
    feedback = config.search.feedback.model_copy(update=settings)
    search = config.search.model_copy(update={"feedback": feedback})
    return config.model_copy(update={"search": search})


@pytest.mark.parametrize("warm", [False, True])
def test_hybrid_search_re_scores_its_vector_candidates(sample_index, warm: bool) -> None:  # type: ignore[no-untyped-def]
    """Hybrid search (cold: LanceDB's vectors; warm: the in-memory ones) re-scores the
    vector list's candidates with the moved query: a `feedback` stage, vector scores
    that are no longer the plain cosines, and no chunk that was not a candidate;
    `enabled = false` and `weight = 0` give plain hybrid search."""
    from rag_serving.search import SearchEngine

    on = SearchEngine(sample_index)
    off = SearchEngine(_with_feedback(sample_index, enabled=False))
    zero = SearchEngine(_with_feedback(sample_index, weight=0.0))
    queries = ["tomato seedlings", "how to plan a trip", "meeting notes", "garden"]
    if warm:
        for engine in (on, off, zero):
            for query in queries:
                engine.search(query)
    moved = 0
    for query in queries:
        result = on.search(query, k=10)
        assert "feedback" in result.timings
        plain = off.search(query, k=10)
        assert "feedback" not in plain.timings
        assert [h.chunk_id for h in zero.search(query, k=10).hits] == [
            h.chunk_id for h in plain.hits
        ]
        cosine = {h.chunk_id: h.score for h in off.search(query, k=200, mode="vector").hits}
        for hit in result.hits:
            if "vector" in hit.explain:
                assert hit.chunk_id in cosine  # re-scored, never added
                moved += abs(hit.explain["vector"]["score"] - cosine[hit.chunk_id]) > 1e-4
        for mode in ("vector", "bm25"):
            assert "feedback" not in on.search(query, k=5, mode=mode).timings
    assert moved > 0
