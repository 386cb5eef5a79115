"""The link prior in hybrid search (rag_serving/search/links.py), on a small vault
indexed through the real pipeline: a note many notes link to, or one the other top
hits link to, moves up; without links nothing changes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from rag_serving.config import LinksConfig, RaglineConfig
from rag_serving.index.filters import SearchFilters
from rag_serving.search.fusion import FusedHit
from rag_serving.search.links import LinkCounts, LinkPriorSettings, with_link_prior
from tests.conftest import build_index, write_config

NOTES = {
    # A strong match for the sourdough query, linked from nowhere …
    "Starter notes.md": "# Starter notes\n\nSourdough starter hydration ratio: I keep my "
    "sourdough starter at a 100% hydration ratio, the same weight of flour and water.\n",
    # … and a weaker one that five bake logs link to.
    "Levain.md": "# Levain\n\nA levain is a sourdough starter built for one bake; its "
    "hydration is usually between 80 and 100 percent.\n",
    **{
        f"Bake {day}.md": f"# Bake {day}\n\nCountry loaf on day {day}, with the [[Levain]] "
        "from the night before. Oven at 250 degrees, lid off after twenty minutes.\n"
        for day in (3, 9, 14, 21, 27)
    },
    # The kiln query: a manual that matches best, and the schedule two glaze tests
    # (themselves strong matches) link to.
    "Kiln manual.md": "# Kiln manual\n\nKiln firing schedule for cone 6: the kiln firing "
    "schedule ramps 150 degrees an hour to cone 6, holds, then cools.\n",
    "Firing schedule.md": "# Firing schedule\n\nThe schedule I use: a slow ramp, a hold "
    "at the top and a controlled cool.\n",
    "Glaze test 12.md": "# Glaze test 12\n\nCone 6 kiln firing of the celadon tiles, on "
    "the [[Firing schedule]]; crazing on two of six.\n",
    "Glaze test 13.md": "# Glaze test 13\n\nCone 6 kiln firing of the tenmoku tiles, on "
    "the [[Firing schedule]]; no crazing.\n",
}
PLAIN = {
    "Tea.md": "# Tea\n\nGreen tea steeps at 80 degrees for two minutes.\n",
    "Coffee.md": "# Coffee\n\nA pour-over brews at 94 degrees for three minutes.\n",
}
SOURDOUGH = "sourdough starter hydration ratio"
KILN = "kiln firing schedule cone 6"


@pytest.fixture(scope="module")
def linked_index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    """Two sources: ``vault`` with wikilinks between its notes, ``plain`` without any."""
    root = tmp_path_factory.mktemp("link-prior")
    for folder, notes in (("vault", NOTES), ("plain", PLAIN)):
        (root / folder).mkdir()
        for name, text in notes.items():
            (root / folder / name).write_text(text)
    sources: list[dict[str, object]] = [
        {"name": name, "kind": "markdown", "path": str(root / name)} for name in ("vault", "plain")
    ]
    return build_index(write_config(root / "config", sources))


def with_links(config: RaglineConfig, **settings: Any) -> RaglineConfig:
    links = LinksConfig(**settings)
    return config.model_copy(update={"search": config.search.model_copy(update={"links": links})})


def paths(engine: Any, query: str, source: str) -> list[str]:
    hits = engine.search(query, k=10, filters=SearchFilters(sources=(source,))).hits
    return list(dict.fromkeys(hit.path for hit in hits))


def test_backlinks_lift_the_note_many_notes_link_to(
    linked_index: RaglineConfig, engine_for: Any
) -> None:
    off = engine_for(with_links(linked_index, enabled=False))
    before = paths(off, SOURDOUGH, "vault")
    assert before.index("Starter notes.md") < before.index("Levain.md")
    on = engine_for(with_links(linked_index, enabled=True, backlinks=1.0, linked=0.0))
    result = on.search(SOURDOUGH, k=10, filters=SearchFilters(sources=("vault",)))
    assert result.hits[0].path == "Levain.md"
    lift = result.hits[0].explain["links"]
    assert lift["backlinks"] == 5
    assert lift["factor"] == pytest.approx(1 + 1.0 * math.log1p(5))
    assert lift["fused_score"] == pytest.approx(result.hits[0].score / lift["factor"])
    assert "links" in result.timings
    # the unlinked note keeps its fused score
    starter = next(h for h in result.hits if h.path == "Starter notes.md")
    assert "links" not in starter.explain


def test_a_note_the_other_top_hits_link_to_moves_up(
    linked_index: RaglineConfig, engine_for: Any
) -> None:
    off = engine_for(with_links(linked_index, enabled=False))
    before = paths(off, KILN, "vault")
    assert before[0] == "Kiln manual.md"
    top_four = set(before[:4])
    assert {"Glaze test 12.md", "Glaze test 13.md"} <= top_four
    on = engine_for(with_links(linked_index, enabled=True, backlinks=0.0, linked=1.0, top=4))
    result = on.search(KILN, k=10, filters=SearchFilters(sources=("vault",)))
    schedule = next(h for h in result.hits if h.path == "Firing schedule.md")
    assert schedule.explain["links"]["linked_from_top"] == 2
    after = list(dict.fromkeys(h.path for h in result.hits))
    assert after.index("Firing schedule.md") < before.index("Firing schedule.md")
    assert after[0] == "Firing schedule.md"
    # a warm engine reads the document ids from its in-memory copy: the same lift
    for _ in range(2):
        warm = on.search(KILN, k=10, filters=SearchFilters(sources=("vault",)))
    assert on.warm
    assert [h.chunk_id for h in warm.hits] == [h.chunk_id for h in result.hits]
    assert [h.score for h in warm.hits] == pytest.approx([h.score for h in result.hits], rel=1e-4)
    assert warm.hits[0].explain["links"] == pytest.approx(result.hits[0].explain["links"], rel=1e-4)


def test_no_op_where_there_are_no_links(linked_index: RaglineConfig, engine_for: Any) -> None:
    """Notes without links (and linked to by none) keep their order and scores."""
    filters = SearchFilters(sources=("plain",))
    off = engine_for(with_links(linked_index, enabled=False)).search("brew at degrees", k=5,
                                                                     filters=filters)  # fmt: skip
    on = engine_for(with_links(linked_index, enabled=True, backlinks=1.0, linked=1.0)).search(
        "brew at degrees", k=5, filters=filters
    )
    assert [(h.chunk_id, h.score) for h in on.hits] == [(h.chunk_id, h.score) for h in off.hits]
    assert all("links" not in h.explain for h in on.hits)


def test_an_index_without_links_has_no_counts(tmp_path: Path, engine_for: Any) -> None:
    (tmp_path / "plain").mkdir()
    for name, text in PLAIN.items():
        (tmp_path / "plain" / name).write_text(text)
    config = build_index(
        write_config(
            tmp_path, [{"name": "plain", "kind": "markdown", "path": str(tmp_path / "plain")}]
        )
    )
    engine = engine_for(with_links(config, enabled=True))
    assert not engine.link_counts()
    result = engine.search("green tea", k=3)
    assert result.hits and all("links" not in h.explain for h in result.hits)


def test_the_prior_lifts_only_linked_documents_and_keeps_ties_in_order() -> None:
    counts = LinkCounts(backlinks={"b": 3}, outgoing={"c": frozenset({"b"})})
    fused = [FusedHit("1", 2.0, {}), FusedHit("2", 1.0, {}), FusedHit("3", 1.0, {})]
    doc_of = {"1": "a", "2": "b", "3": "c"}
    settings = LinkPriorSettings(backlinks=0.5, linked=0.5, top=3)
    reordered, lifts = with_link_prior(fused, doc_of, counts, settings)
    factor = 1 + 0.5 * math.log1p(3) + 0.5 * math.log1p(1)
    assert [h.id for h in reordered] == ["2", "1", "3"]
    assert reordered[0].score == pytest.approx(factor)
    assert set(lifts) == {"2"} and lifts["2"].linked_from_top == 1
    # ``c`` links to ``b`` but is not in the top 1: no link from the top hits counts
    _, lifts = with_link_prior(fused, doc_of, counts, LinkPriorSettings(0.0, 0.5, top=1))
    assert lifts == {}


def test_the_counts_are_kept_for_the_next_process(
    linked_index: RaglineConfig, engine_for: Any
) -> None:
    first = engine_for(with_links(linked_index, enabled=True)).link_counts()
    path = Path(linked_index.data_dir) / "search-links.json"
    assert path.is_file()
    kept = json.loads(path.read_text())
    assert sorted(kept["backlinks"].values()) == [2, 5]  # Firing schedule, Levain
    second = engine_for(with_links(linked_index, enabled=True)).link_counts()
    assert dict(second.backlinks) == dict(first.backlinks)
    assert dict(second.outgoing) == dict(first.outgoing)
    # counts kept for another state of the index are not used: built again
    kept["key"]["documents"] = -5
    kept["backlinks"] = {}
    path.write_text(json.dumps(kept))
    third = engine_for(with_links(linked_index, enabled=True)).link_counts()
    assert dict(third.backlinks) == dict(first.backlinks)


def test_stored_links_are_read_within_their_caps() -> None:
    from rag_serving.index.links import MAX_LINKS_JSON_CHARS, MAX_LINKS_PER_DOCUMENT, stored_links

    many = json.dumps([{"target": f"n{i}"} for i in range(MAX_LINKS_PER_DOCUMENT + 10)])
    assert len(stored_links(many)) == MAX_LINKS_PER_DOCUMENT
    assert stored_links("[" * 100_000 + "]" * 100_000) == []  # deeper than JSON can read
    assert stored_links('{"target": "x"}') == [] and stored_links("not json") == []
    assert stored_links(json.dumps([{"target": "x" * MAX_LINKS_JSON_CHARS}])) == []


def test_a_kept_counts_file_that_is_malformed_or_too_large_is_built_again(
    linked_index: RaglineConfig, engine_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_serving.search import links

    first = engine_for(with_links(linked_index, enabled=True)).link_counts()
    path = Path(linked_index.data_dir) / "search-links.json"
    kept = json.loads(path.read_text())
    key = kept["key"]
    for broken in ({**kept, "outgoing": ["x"]}, {**kept, "backlinks": {"a": "many"}}):
        path.write_text(json.dumps(broken))
        assert LinkCounts.load(path, key) is None
    path.write_text(json.dumps(kept))
    assert LinkCounts.load(path, key) is not None
    monkeypatch.setattr(links, "MAX_COUNTS_BYTES", path.stat().st_size - 1)
    assert LinkCounts.load(path, key) is None
    again = engine_for(with_links(linked_index, enabled=True)).link_counts()
    assert dict(again.backlinks) == dict(first.backlinks)
