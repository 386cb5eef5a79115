"""One hit per document (issue 31, item 5): what the first page of hits is worth with
and without collapsing, and what collapsing costs, measured in the same run.

The page is what a user or an agent gets: the first ``K`` hits of a search. Its
nDCG@K counts each document once — a second chunk of a document already shown
gains nothing, as it tells the reader nothing new — so a page filled by one
document's chunks scores below a page of ``K`` documents. Sets:

- the Obsidian help vault (173 notes, many of several sections) with the known-item
  queries of ``ragline eval --self`` (words around a link → the linked note, the
  linking note left out; a heading → its note; a distinctive fragment → its note);
- the BEIR dev sets of ``ragline eval`` (one abstract or function per document, so
  few documents have a second chunk there: collapsing should change little).

Latency: the hybrid p50 of the same queries on a warm engine, collapsed ÷ not.

    .venv/bin/python -m benchmarks.collapse [--sets help,cranfield,cisi,scifact,cosqa]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from benchmarks.beir_sets import SETS
from benchmarks.report import SHARED_DATA, save

K = 10
WORK = Path("/tmp/ragline-collapse")
HELP_VAULT = SHARED_DATA / "corpora" / "obsidian-help-en"
LATENCY_ROUNDS = 3


def page_ndcg(page: Sequence[str], relevant: dict[str, int], k: int = K) -> float:
    """nDCG@k of a page of hits given as document ids: a document's later hits gain 0."""
    ideal_gains = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    if not ideal:
        return 0.0
    seen: set[str] = set()
    total = 0.0
    for i, doc in enumerate(page[:k]):
        if doc not in seen:
            total += max(relevant.get(doc, 0), 0) / math.log2(i + 2)
            seen.add(doc)
    return total / ideal


def _page(engine: Any, query: str, collapse: bool, skip: str | None = None) -> list[str]:
    hits = engine.search(query, k=K + (1 if skip else 0), collapse=collapse).hits
    return [h.doc_id for h in hits if h.doc_id != skip][:K]


def _measure(engine: Any, queries: list[tuple[str, dict[str, int], str | None]]) -> dict[str, Any]:
    """Page nDCG@K, distinct documents per page and hybrid p50 (ms), each way."""
    out: dict[str, Any] = {"queries": len(queries)}
    for label, collapse in (("off", False), ("on", True)):
        pages = [_page(engine, q, collapse, skip) for q, _, skip in queries]
        out[f"ndcg_{label}"] = statistics.fmean(
            page_ndcg(p, rel) for p, (_, rel, _) in zip(pages, queries, strict=True)
        )
        out[f"documents_{label}"] = statistics.fmean(len(set(p)) for p in pages)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(LATENCY_ROUNDS):  # in turns, so both see the same machine
        for collapse in (False, True):
            for query, _, _ in queries:
                started = time.perf_counter()
                engine.search(query, k=K, collapse=collapse)
                times[collapse].append((time.perf_counter() - started) * 1000)
    out["p50_ms_off"] = statistics.median(times[False])
    out["p50_ms_on"] = statistics.median(times[True])
    return out


def help_vault() -> tuple[Any, list[tuple[str, dict[str, int], str | None]]]:
    from rag_serving.config import parse_config_file
    from rag_serving.evaluation.self_eval.queries import read_corpus
    from rag_serving.evaluation.self_eval.query_set import build_queries
    from rag_serving.search import SearchEngine
    from ragline.indexing import index_sources

    root = WORK / "help"
    root.mkdir(parents=True, exist_ok=True)
    path = root / "ragline.toml"
    path.write_text(tomli_w.dumps({
        "data_dir": str(root / "data"),
        "sources": [{"name": "help", "kind": "markdown", "path": str(HELP_VAULT)}],
    }))  # fmt: skip
    config = parse_config_file(path)
    [outcome] = index_sources(config, ["help"], full=False)
    assert outcome.success, outcome.error
    built = build_queries(read_corpus(config, ["help"]), ["help"])
    queries = [(q.query, {q.doc_id: 1}, q.origin) for q in built.queries]
    return SearchEngine(config), queries


def beir_set(name: str) -> tuple[Any, list[tuple[str, dict[str, int], str | None]]]:
    from rag_serving.evaluation.beir import load_beir
    from rag_serving.search import SearchEngine
    from ragline.eval_command import prepare_index

    dataset = load_beir(SHARED_DATA / "eval" / name, SETS[name])
    prepared = prepare_index(dataset, WORK / name, None)
    engine = SearchEngine(prepared.config)
    id_of_path = prepared.path_to_id
    from rag_serving.index.store import IndexStore

    store = IndexStore(prepared.config.data_dir)
    docs = store.read("documents", columns=["doc_id", "path"]).to_pylist()
    doc_of_corpus = {id_of_path[d["path"]]: d["doc_id"] for d in docs if d["path"] in id_of_path}
    queries = []
    for qid, judged in dataset.qrels.items():
        if qid in dataset.queries:
            relevant = {doc_of_corpus[c]: g for c, g in judged.items() if c in doc_of_corpus}
            queries.append((dataset.queries[qid], relevant, None))
    return engine, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default="help,cranfield,cisi,scifact,cosqa")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for name in args.sets.split(","):
        engine, queries = help_vault() if name == "help" else beir_set(name)
        engine.search("warm up", k=K)
        results[name] = _measure(engine, queries)
        print(name, results[name], flush=True)
    rows = [
        "| set | queries | page nDCG@10 without → with | documents per page without → with "
        "| hybrid p50 ms without → with | with ÷ without |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        label = "help vault (self-eval)" if name == "help" else f"{name} ({SETS[name]})"
        rows.append(
            f"| {label} | {r['queries']} | {r['ndcg_off']:.4f} → **{r['ndcg_on']:.4f}** "
            f"| {r['documents_off']:.2f} → {r['documents_on']:.2f} "
            f"| {r['p50_ms_off']:.1f} → {r['p50_ms_on']:.1f} "
            f"| {r['p50_ms_on'] / r['p50_ms_off']:.2f} |"
        )
    text = (
        f"The first page (k={K}) of hybrid hits, without and with one hit per document "
        "(`[search] collapse`, the default now), same index, same queries. Page nDCG@10 "
        "counts each document once: a second chunk of a document already on the page "
        "gains nothing. Latency: median of "
        f"{LATENCY_ROUNDS} rounds of every query on a warm engine, in turns.\n\n" + "\n".join(rows)
    )
    save("collapse", results, text, "python -m benchmarks.collapse")


if __name__ == "__main__":
    main()
