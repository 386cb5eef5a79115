"""The link prior on a second vault: the Obsidian help vault's known-item queries of
``ragline eval --self`` (words around a link → the linked note, the linking note left
out; a heading → its note; a distinctive fragment → its note), with the prior off, at
the setting the Hub set picked, and at a cautious one, in one run on one index.

The Hub set (benchmarks/link_prior.py) is built from links alone; this one asks
whether a prior that wins there costs the searches that are not about links.

    .venv/bin/python -m benchmarks.link_prior_help
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.collapse import K, help_vault, page_ndcg
from benchmarks.report import save

SETTINGS = {  # label → (enabled, backlinks, linked)
    "off": (False, 0.0, 0.0),
    "0.4 / 0.4 (the Hub set's pick)": (True, 0.4, 0.4),
    "0.05 / 0.1 (cautious)": (True, 0.05, 0.1),
}


def main() -> None:
    from rag_serving.search import SearchEngine

    engine, _ = help_vault()
    config = engine.config
    from rag_serving.evaluation.self_eval.queries import read_corpus
    from rag_serving.evaluation.self_eval.query_set import build_queries

    queries = build_queries(read_corpus(config, ["help"]), ["help"]).queries
    results: dict[str, Any] = {}
    for label, (enabled, backlinks, linked) in SETTINGS.items():
        update = {"enabled": enabled, "backlinks": backlinks, "linked": linked}
        links = config.search.links.model_copy(update=update)
        search = config.search.model_copy(update={"links": links})
        engine = SearchEngine(config.model_copy(update={"search": search}))
        by_type: dict[str, list[float]] = {}
        for q in queries:
            hits = engine.search(q.query, k=K + 1).hits
            page = [h.doc_id for h in hits if h.doc_id != q.origin][:K]
            by_type.setdefault(q.type, []).append(page_ndcg(page, {q.doc_id: 1}))
        scores = {t: statistics.fmean(v) for t, v in by_type.items()}
        scores["all"] = statistics.fmean(x for v in by_type.values() for x in v)
        results[label] = {"ndcg": scores, "queries": {t: len(v) for t, v in by_type.items()}}
        print(label, scores, flush=True)
    types = list(next(iter(results.values()))["queries"])
    counts = next(iter(results.values()))["queries"]
    rows = [
        "| link prior (backlinks / linked) | "
        + " | ".join(f"{t} ({counts[t]})" for t in types)
        + " | all |",
        "|---|" + "---|" * (len(types) + 1),
    ]
    for label, r in results.items():
        cells = " | ".join(f"{r['ndcg'][t]:.4f}" for t in [*types, "all"])
        rows.append(f"| {label} | {cells} |")
    text = (
        "nDCG@10 of the first page of hybrid hits (one hit per document) on the Obsidian "
        "help vault (173 notes), for the known-item queries of `ragline eval --self`, "
        "same index, same run.\n\n" + "\n".join(rows)
    )
    save("link_prior_help", results, text, "python -m benchmarks.link_prior_help")


if __name__ == "__main__":
    main()
