"""Contextual chunk text (issue 31, item 2): the document's title leading each chunk's
embedded text (``[chunking] context = "title"``) against the heading path alone
(``"headings"``), per kind, on the same queries in one run.

Each corpus is indexed twice, once per setting, into its own data folder. The
queries are the known-item queries of ``ragline eval --self`` (words around a link →
the linked note, the linking note left out; a heading → its document; a distinctive
fragment → its document), built once from the ``headings`` index, so both settings
answer the same questions; document ids do not depend on the setting. Scored as a
page of ``K`` hits (nDCG@K, a document counted once), in hybrid, vector and bm25
modes (the title changes what is embedded, not what is keyword-indexed: bm25 is a
check that nothing else moved).

Corpora: the Obsidian help vault (Markdown, titles from file names, most notes
without a ``#`` title), the PDF folder of ``../shared/data/corpora`` (``kind =
"documents"``; titles from the files' metadata, else their names), the mail corpus
(titles are subjects) and, on request, the EPUB folder (27,680 chunks: too slow for
two indexes on a 2-core machine).

    .venv/bin/python -m benchmarks.contextual_chunks [--corpora help,pdf,email]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import tomli_w

from benchmarks.collapse import K, page_ndcg
from benchmarks.report import SHARED_DATA, save

WORK = Path("/tmp/ragline-contextual")
CORPORA = {  # name → (kind, folder)
    "help": ("markdown", SHARED_DATA / "corpora" / "obsidian-help-en"),
    "pdf": ("documents", SHARED_DATA / "corpora" / "pdf"),
    "epub": ("documents", SHARED_DATA / "corpora" / "epub"),
    "email": ("mail", SHARED_DATA / "corpora" / "email"),
}
SETTINGS = ("headings", "title")
MODES = ("hybrid", "vector", "bm25")


def _index(name: str, setting: str) -> tuple[Any, float]:
    """The corpus indexed with one setting (kept between runs); seconds it took."""
    from rag_serving.config import parse_config_file
    from ragline.indexing import index_sources

    kind, folder = CORPORA[name]
    root = WORK / f"{name}-{setting}"
    root.mkdir(parents=True, exist_ok=True)
    path = root / "ragline.toml"
    path.write_text(tomli_w.dumps({
        "data_dir": str(root / "data"),
        "chunking": {"context": setting},
        "sources": [{"name": name, "kind": kind, "path": str(folder)}],
    }))  # fmt: skip
    config = parse_config_file(path)
    started = time.perf_counter()
    outcomes = index_sources(config, [name], full=False)  # a deferred OCR pass is a second
    assert all(o.success for o in outcomes), [o.error for o in outcomes]
    return config, time.perf_counter() - started


def measure(name: str) -> dict[str, Any]:
    from rag_serving.evaluation.self_eval.queries import read_corpus
    from rag_serving.evaluation.self_eval.query_set import build_queries
    from rag_serving.search import SearchEngine

    configs = {s: _index(name, s) for s in SETTINGS}
    queries = build_queries(read_corpus(configs["headings"][0], [name]), [name]).queries
    out: dict[str, Any] = {"queries": {}, "ndcg": {}, "index_s": {}}
    for setting in SETTINGS:
        config, seconds = configs[setting]
        out["index_s"][setting] = seconds
        engine = SearchEngine(config)
        for mode in MODES:
            by_type: dict[str, list[float]] = {}
            for q in queries:
                hits = engine.search(q.query, k=K + 1, mode=mode).hits
                page = [h.doc_id for h in hits if h.doc_id != q.origin][:K]
                by_type.setdefault(q.type, []).append(page_ndcg(page, {q.doc_id: 1}))
            scores = {t: statistics.fmean(v) for t, v in by_type.items()}
            scores["all"] = statistics.fmean(x for v in by_type.values() for x in v)
            out["ndcg"][f"{setting}/{mode}"] = scores
            out["queries"] = {t: len(v) for t, v in by_type.items()}
            print(name, setting, mode, {t: round(v, 4) for t, v in scores.items()}, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", default="help,pdf,email")
    args = parser.parse_args()
    names = [n for n in args.corpora.split(",") if n]
    results = {name: measure(name) for name in names}
    lines = [
        f"Page nDCG@{K} (a document counted once) of the `ragline eval --self` known-item "
        "queries, built once per corpus from the `headings` index; each corpus indexed "
        "once per setting in this run. Δ = title − headings.",
        "",
        "| corpus | mode | query type (n) | headings | title | Δ |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        for mode in MODES:
            for t in [*r["queries"], "all"]:
                n = r["queries"].get(t, sum(r["queries"].values()))
                a = r["ndcg"][f"headings/{mode}"][t]
                b = r["ndcg"][f"title/{mode}"][t]
                lines.append(f"| {name} | {mode} | {t} ({n}) | {a:.4f} | {b:.4f} | {b - a:+.4f} |")
    lines += ["", "Index time in this run, s (an index kept from an earlier run only checks for changes): " + "; ".join(
        f"{name}: headings {r['index_s']['headings']:.0f}, title {r['index_s']['title']:.0f}"
        for name, r in results.items()
    )]  # fmt: skip
    save(
        "contextual_chunks",
        results,
        "\n".join(lines),
        "python -m benchmarks.contextual_chunks --corpora " + ",".join(names),
    )


if __name__ == "__main__":
    main()
