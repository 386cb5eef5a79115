"""The keyword side (issue 31, item 1): bm25 and hybrid nDCG@10 on the four BEIR dev
sets and the Obsidian help vault's known-item set, shipped and with each part taken
away (same index, same run), beside the anchors re-measured in this run: plain
Tantivy BM25 over whole documents (its query parser: a repeated word once; and with
the query's counts), and LanceDB's own full-text search.

The parts: the query's words weighed (``weigh_query_words``: English stop words at
0.2, a repeated word counted) and each chunk's document scored as one text
(``FulltextIndex.document_scores``, rag_serving/search/documents.py). "Before" takes
both away and counts repeated words in bm25 mode only, as the revision before this
did. Each variant patches the functions in this process; the index is the one
``ragline eval`` prepares (kept in ``/tmp/ragline-collapse/<set>``, shared with
benchmarks/collapse.py; the help vault's as benchmarks/collapse.py builds it).

    .venv/bin/python -m benchmarks.keyword_side [--sets cranfield,cisi,scifact,cosqa,help]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks.beir_sets import SETS
from benchmarks.collapse import beir_set, help_vault, page_ndcg
from benchmarks.report import SHARED_DATA, save

K = 10
DEPTH = 100
_WORD = re.compile(r"\w+")


def _dataset(name: str) -> Any:
    from rag_serving.evaluation.beir import load_beir

    return load_beir(SHARED_DATA / "eval" / name, SETS[name])


def _mean_ndcg(dataset: Any, rankings: dict[str, list[str]]) -> float:
    from rag_serving.evaluation.metrics import mean, ndcg_at_k

    return mean([ndcg_at_k(rankings[q], dataset.qrels[q], K) for q in dataset.judged_queries()])


def _counted(words: list[str]) -> str:
    """The words with each repeated one written once, boosted by its count."""
    counts = Counter(w.casefold() for w in words)
    seen: set[str] = set()
    out = []
    for word in words:
        key = word.casefold()
        if key not in seen:
            seen.add(key)
            out.append(f"{word}^{counts[key]}" if counts[key] > 1 else word)
    return " ".join(out)


def plain_tantivy(dataset: Any) -> dict[str, float]:
    """Tantivy's ``en_stem`` over whole documents (title and text one field): the
    query's words as its parser scores them, and with their counts as boosts."""
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("body", tokenizer_name="en_stem")
    index = tantivy.Index(builder.build())
    writer = index.writer(heap_size=64_000_000, num_threads=1)
    for doc in dataset.corpus:
        writer.add_document(tantivy.Document(id=doc.id, body=f"{doc.title}\n{doc.text}"))
    writer.commit()
    index.reload()
    searcher = index.searcher()
    out = {}
    for label, text_of in (("once", " ".join), ("counted", _counted)):
        rankings = {}
        for qid in dataset.judged_queries():
            text = text_of(_WORD.findall(dataset.queries[qid]))
            query, _ = index.parse_query_lenient(text, default_field_names=["body"])
            hits = searcher.search(query, DEPTH).hits
            rankings[qid] = [searcher.doc(address)["id"][0] for _score, address in hits]
        out[label] = _mean_ndcg(dataset, rankings)
    return out


def lancedb_fts(dataset: Any) -> float:
    """LanceDB's native full-text index with its defaults (English stemming, stop words
    removed, ASCII folding) over whole documents."""
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(tempfile.mkdtemp(prefix="ragline-lancedb-fts-"))
    data = pa.table({
        "id": [doc.id for doc in dataset.corpus],
        "body": [f"{doc.title}\n{doc.text}" for doc in dataset.corpus],
    })  # fmt: skip
    table = db.create_table("docs", data, mode="overwrite")
    table.create_fts_index("body", use_tantivy=False, stem=True, remove_stop_words=True)
    rankings = {}
    for qid in dataset.judged_queries():
        words = " ".join(_WORD.findall(dataset.queries[qid]))
        rows = table.search(words, query_type="fts").limit(DEPTH).select(["id"]).to_list()
        rankings[qid] = [row["id"] for row in rows]
    return _mean_ndcg(dataset, rankings)


@contextmanager
def _variant(name: str) -> Iterator[None]:
    """The keyword side with a part taken away (``name``), in this process."""
    import rag_serving.index.fulltext as fulltext

    weigh, scores = fulltext.weigh_query_words, fulltext.FulltextIndex.document_scores
    search = fulltext.FulltextIndex.search
    if name in ("before", "chunks"):
        fulltext.FulltextIndex.document_scores = lambda *args, **kwargs: {}  # type: ignore[method-assign]
    if name == "before":
        fulltext.weigh_query_words = fulltext.weigh_repeated_words

        def counted_in_bm25_mode_only(self: Any, text: str, filters: Any, limit: int,
                                      weigh_words: bool = False) -> Any:  # fmt: skip
            return search(self, text, filters, limit, weigh_words=weigh_words and _BM25_MODE[0])

        fulltext.FulltextIndex.search = counted_in_bm25_mode_only  # type: ignore[method-assign]
    try:
        yield
    finally:
        fulltext.weigh_query_words = weigh
        fulltext.FulltextIndex.document_scores = scores  # type: ignore[method-assign]
        fulltext.FulltextIndex.search = search  # type: ignore[method-assign]


_BM25_MODE = [False]  # which mode "before" is searching in (it counted in bm25 only)
VARIANTS = ("before", "chunks", "shipped")


def ragline(name: str) -> dict[str, float]:
    """bm25 and hybrid page nDCG@10 of the prepared index, per variant."""
    engine, queries = help_vault() if name == "help" else beir_set(name)
    engine.search("warm up", k=K)
    out = {}
    for variant in VARIANTS:
        with _variant(variant):
            for mode in ("bm25", "hybrid"):
                _BM25_MODE[0] = mode == "bm25"
                scores = [
                    page_ndcg([h.doc_id for h in engine.search(q, k=K, mode=mode).hits], rel)
                    for q, rel, _ in queries
                ]
                out[f"{mode}_{variant}"] = statistics.fmean(scores)
    out["queries"] = len(queries)
    return out


# The hybrid anchors (LanceDB hybrid SciFact / Cranfield / CISI, and RRF or
# dense retrieval for CoSQA), as issue 31 states them: not re-measured here.
HYBRID_ANCHORS = {"scifact": 0.710, "cranfield": 0.418, "cisi": 0.438, "cosqa": 0.603}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join([*SETS, "help"]))
    args = parser.parse_args()
    rows: dict[str, dict[str, float]] = {}
    for name in args.sets.split(","):
        row: dict[str, float] = {}
        if name != "help":
            dataset = _dataset(name)
            tantivy_scores = plain_tantivy(dataset)
            row |= {
                "tantivy_once": tantivy_scores["once"],
                "tantivy_counted": tantivy_scores["counted"],
                "lancedb_fts": lancedb_fts(dataset),
            }
        row |= ragline(name)
        rows[name] = row
        print(name, {k: round(v, 4) for k, v in row.items()}, flush=True)
    lines = [
        "| set (split) | plain Tantivy: once / counted | LanceDB FTS | ragline bm25: before → "
        "chunks only → **shipped** | hybrid anchor | ragline hybrid: before → chunks only → "
        "**shipped** |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        label = "help vault (known-item)" if name == "help" else f"{name} ({SETS[name]})"
        anchors = (
            "— | —"
            if name == "help"
            else f"{r['tantivy_once']:.4f} / {r['tantivy_counted']:.4f} | {r['lancedb_fts']:.4f}"
        )
        lines.append(
            f"| {label} | {anchors} "
            f"| {r['bm25_before']:.4f} → {r['bm25_chunks']:.4f} → **{r['bm25_shipped']:.4f}** "
            f"| {f'{HYBRID_ANCHORS[name]:.3f}' if name in HYBRID_ANCHORS else '—'} "
            f"| {r['hybrid_before']:.4f} → {r['hybrid_chunks']:.4f} → "
            f"**{r['hybrid_shipped']:.4f}** |"
        )
    markdown = (
        "nDCG@10 (ragline: a page of 10 hits, one per document, as `ragline eval` scores "
        "it), one index per set, every variant in this run. *Before*: the keyword side "
        "of the previous revision (chunks only; a repeated word counted in bm25 mode). "
        "*Chunks only*: the words weighed (English stop words at 0.2, a repeated word "
        "counted: bm25 mode, and hybrid questions of 10 words or more), no document "
        "scores. *Shipped*: besides, a query of 4 words or more ranks chunks by their "
        "document's BM25 as one text plus 0.2 of their own. Anchors (plain Tantivy "
        "`en_stem` over whole documents, the query's words ORed, a repeated word once / "
        "counted; LanceDB's FTS with its defaults) re-measured in this run; the hybrid "
        "anchors are the issue's. The help vault's queries are `ragline eval --self`'s "
        "(headings, fragments, links).\n\n" + "\n".join(lines)
    )
    save("keyword_side", {"sets": rows}, markdown, "python -m benchmarks.keyword_side")


if __name__ == "__main__":
    main()
