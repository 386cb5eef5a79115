"""A word the query repeats, counted as often as it is written (issue 31, item 1): on
the four BEIR dev sets, bm25 and hybrid nDCG@10 with the keyword query's repeated
words weighted by their count and without (the same index, the same run), beside the
anchors: plain Tantivy BM25 over whole documents as its query parser scores a query
(a repeated word once) and with the query's term frequency, and LanceDB's own
full-text search (which counts it).

The index of each set is the one ``ragline eval`` prepares (kept in
``/tmp/ragline-collapse/<set>``, shared with benchmarks/collapse.py). "Without" is
the same engine with ``FulltextIndex.search``'s ``count_repeats`` forced off, and
"counted" forced on, in this process: the only difference between the two columns is
the query text Tantivy parses. Shipped: bm25 mode counts, hybrid does not.

    .venv/bin/python -m benchmarks.repeated_words [--sets cranfield,cisi,scifact,cosqa]
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import tempfile
from collections import Counter
from typing import Any

from benchmarks.beir_sets import SETS
from benchmarks.collapse import beir_set, page_ndcg
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


def ragline(name: str) -> dict[str, float]:
    """bm25 and hybrid page nDCG@10 of the prepared index, with the keyword query's
    repeated words scored once and counted (``FulltextIndex.search``'s
    ``count_repeats`` forced each way in this process)."""
    from rag_serving.index.fulltext import FulltextIndex

    engine, queries = beir_set(name)
    engine.search("warm up", k=K)
    original = FulltextIndex.search

    def forced(count: bool) -> Any:
        def search(self: Any, text: str, filters: Any, limit: int, count_repeats: bool = False):
            return original(self, text, filters, limit, count_repeats=count)

        return search

    out = {}
    try:
        for label, count in (("once", False), ("counted", True)):
            FulltextIndex.search = forced(count)  # type: ignore[method-assign]
            for mode in ("bm25", "hybrid"):
                scores = [
                    page_ndcg([h.doc_id for h in engine.search(q, k=K, mode=mode).hits], rel)
                    for q, rel, _ in queries
                ]
                out[f"{mode}_{label}"] = statistics.fmean(scores)
    finally:
        FulltextIndex.search = original  # type: ignore[method-assign]
    return out


def repeats(dataset: Any) -> float:
    """The share of judged queries that repeat a word."""
    judged = dataset.judged_queries()
    repeating = 0
    for qid in judged:
        words = [w.casefold() for w in _WORD.findall(dataset.queries[qid])]
        repeating += len(words) != len(set(words))
    return repeating / len(judged) if judged else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default=",".join(SETS))
    args = parser.parse_args()
    rows: dict[str, dict[str, float]] = {}
    for name in args.sets.split(","):
        dataset = _dataset(name)
        tantivy_scores = plain_tantivy(dataset)
        row = {
            "repeating_queries": repeats(dataset),
            "tantivy_once": tantivy_scores["once"],
            "tantivy_counted": tantivy_scores["counted"],
            "lancedb_fts": lancedb_fts(dataset),
            **ragline(name),
        }
        rows[name] = row
        print(name, {k: round(v, 4) for k, v in row.items()}, flush=True)
    lines = [
        "| set (split) | queries repeating a word | plain Tantivy: once → counted | "
        "LanceDB FTS | ragline bm25: once → counted | ragline hybrid: once → counted |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} ({SETS[name]}) | {r['repeating_queries']:.0%} "
            f"| {r['tantivy_once']:.4f} → {r['tantivy_counted']:.4f} | {r['lancedb_fts']:.4f} "
            f"| {r['bm25_once']:.4f} → **{r['bm25_counted']:.4f}** "
            f"| **{r['hybrid_once']:.4f}** → {r['hybrid_counted']:.4f} |"
        )
    markdown = (
        "nDCG@10 (ragline: a page of 10 hits, one per document, as `ragline eval` "
        "scores it). *Once*: a word the query repeats is scored once, as Tantivy's query "
        "parser does; *counted*: written once with its count as a boost "
        "(`weigh_repeated_words`). In bold what ragline does: bm25 mode counts, hybrid "
        "mode's keyword list does not (the fusion lost with it). Anchors re-measured in "
        "this run, whole documents, the query's words ORed.\n\n" + "\n".join(lines)
    )
    save("repeated_words", {"sets": rows}, markdown, "python -m benchmarks.repeated_words")


if __name__ == "__main__":
    main()
