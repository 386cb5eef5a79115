"""The link prior (issue 31, item 4) on a link-based set from the Obsidian Hub.

The set: each wikilink of the Hub is a query whose answer is the note it links to,
the linking note left out of the ranking (and the Hub's own links left in the
index, so the prior sees them):

- ``link``: about eight words around the link (``ragline eval --self``'s link
  queries, rag_serving/evaluation/self_eval/links.py);
- ``anchor``: the alias of ``[[target|alias]]``, where it is not the target's name.

At most two queries per target note (a hub note does not fill the set), and the
split of each query (tuning/heldout) is fixed by its hash. Every query is searched
once in hybrid mode without the prior for its 50 best chunks; the prior re-scores
those offline for each setting of the grid (what the engine does with its pool of
50 fused hits), the best setting is picked on the tuning half and reported on the
held-out half. Then the engine itself runs with and without the prior (the picked
setting, and the configured defaults where they differ), queries interleaved on warm
engines: nDCG@10 from ``search(k=50)`` (50 chunks give ten distinct notes), and the
p50 latency of ``search(k=10)`` with the link stage's own milliseconds.

    .venv/bin/python -m benchmarks.link_prior [--work /tmp/ragline-link-prior]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import tomli_w

from benchmarks.report import SHARED_DATA, save
from rag_serving.config import LinksConfig, RaglineConfig, load_config
from rag_serving.evaluation.self_eval.links import link_queries
from rag_serving.evaluation.self_eval.params import MAX_LINKS_PER_TARGET, SEARCH_DEPTH
from rag_serving.evaluation.self_eval.queries import Corpus, SelfQuery, read_corpus
from rag_serving.evaluation.self_eval.scoring import rank_of
from rag_serving.evaluation.self_eval.words import _WIKILINK, _link_parts
from rag_serving.index.filters import SearchFilters
from rag_serving.index.links import LinkGraph
from rag_serving.search.engine import LINK_POOL, SearchEngine
from rag_serving.search.fusion import FusedHit
from rag_serving.search.links import LinkPriorSettings, with_link_prior

HUB = SHARED_DATA / "corpora" / "obsidian-hub"
SOURCE = "hub"
PER_TYPE = 600  # queries of each type, the first by id
K = 10
GRID = {
    "backlinks": (0.0, 0.05, 0.1, 0.2, 0.4),
    "linked": (0.0, 0.1, 0.2, 0.4, 0.8, 1.6),
    "top": (5, 10, 20),
}


def build_index(work: Path, include: list[str]) -> Path:
    """The Hub (its notes matching ``include``, all when empty) indexed into ``work``
    (once: a rerun reuses it)."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "ragline.toml"
    source: dict[str, Any] = {"name": SOURCE, "kind": "markdown", "path": str(HUB)}
    if include:
        source["include"] = include
    config.write_bytes(tomli_w.dumps({
        "data_dir": str(work / "data"),
        "embedder": {"provider": "sentence-transformers"},
        "sources": [source],
    }).encode())  # fmt: skip
    if not (work / "data" / "index.json").exists():
        subprocess.run([sys.executable, "-m", "ragline.cli", "--config", str(config), "index"],
                       check=True)  # fmt: skip
    return config


def anchor_queries(corpus: Corpus) -> list[SelfQuery]:
    """The alias of ``[[target|alias]]`` → the target, where the alias is not the
    target's name or title; an alias naming several targets is dropped."""
    graph = LinkGraph.build([{**d, "aliases": d.get("aliases") or []} for d in corpus.documents])
    by_id = {d["doc_id"]: d for d in corpus.documents}
    found: list[SelfQuery] = []
    for doc in sorted(corpus.documents, key=lambda d: d["doc_id"]):
        resolved = {
            e.link.target.strip().casefold(): e.resolved.doc_id
            for e in graph.outgoing.get(doc["doc_id"], [])
            if e.resolved is not None and e.resolved.doc_id != doc["doc_id"]
        }
        for match in _WIKILINK.finditer(doc.get("body") or ""):
            target_name, alias = _link_parts(match.group(2))
            target = resolved.get(target_name.casefold())
            if target is None or alias is None or len(alias.split()) < 2:
                continue
            names = {target_name.casefold(), by_id[target]["title"].casefold()}
            if alias.casefold() in names:
                continue
            found.append(
                SelfQuery.make("anchor", doc["source"], alias, target, by_id[target]["path"],
                               origin=doc["doc_id"])
            )  # fmt: skip
    targets: dict[str, set[str]] = defaultdict(set)
    for query in found:
        targets[query.query.casefold()].add(query.doc_id)
    kept, seen, per_target = [], set(), Counter[str]()
    for query in sorted(found, key=lambda q: q.id):
        key = (query.query.casefold(), query.doc_id)
        if (
            len(targets[key[0]]) > 1
            or key in seen
            or per_target[query.doc_id] >= (MAX_LINKS_PER_TARGET)
        ):
            continue
        seen.add(key)
        per_target[query.doc_id] += 1
        kept.append(query)
    return kept


def the_set(config: RaglineConfig) -> list[SelfQuery]:
    corpus = read_corpus(config, [SOURCE])
    context = sorted(link_queries(corpus), key=lambda q: q.id)[:PER_TYPE]
    anchors = sorted(anchor_queries(corpus), key=lambda q: q.id)[:PER_TYPE]
    return context + anchors


def scores(ranks: list[int | None]) -> dict[str, float]:
    """nDCG@10, recall@10 and MRR@10 of one relevant document per query."""
    n = max(1, len(ranks))
    return {
        "ndcg@10": sum(1 / math.log2(r + 1) for r in ranks if r) / n,
        "recall@10": sum(1 for r in ranks if r) / n,
        "mrr@10": sum(1 / r for r in ranks if r) / n,
        "queries": len(ranks),
    }


def grouped(queries: list[SelfQuery], ranks: list[int | None]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[int | None]] = defaultdict(list)
    for query, rank in zip(queries, ranks, strict=True):
        for name in ("all", query.split, query.type, f"{query.type}/{query.split}"):
            groups[name].append(rank)
    return {name: scores(r) for name, r in sorted(groups.items())}


class Hit:
    """What rank_of reads of a hit."""

    def __init__(self, doc_id: str, anchor: str = "") -> None:
        self.doc_id, self.anchor = doc_id, anchor


def grid_search(
    engine: SearchEngine, queries: list[SelfQuery], filters: SearchFilters
) -> dict[str, Any]:
    """Every grid setting applied offline to each query's 50 best fused chunks; and
    ``strict``: the same with the linking note's chunks taken out first, so its own
    link to the answer cannot count as one from the top hits."""
    counts = engine.link_counts()
    pools = []
    for query in queries:
        hits = engine.search(query.query, k=LINK_POOL, filters=filters, mode="hybrid").hits
        pools.append(
            (
                [FusedHit(h.chunk_id, h.score, {}) for h in hits],
                {h.chunk_id: h.doc_id for h in hits},
            )
        )
    results = []
    for backlinks, linked, top in itertools.product(*GRID.values()):
        settings = LinkPriorSettings(backlinks, linked, top)
        ranks, strict = [], []
        for query, (fused, doc_of) in zip(queries, pools, strict=True):
            reordered, _ = with_link_prior(fused, doc_of, counts, settings)
            ranks.append(rank_of(query, [Hit(doc_of[h.id]) for h in reordered]))
            others = [h for h in fused if doc_of[h.id] != query.origin]
            reordered, _ = with_link_prior(others, doc_of, counts, settings)
            strict.append(rank_of(query, [Hit(doc_of[h.id]) for h in reordered]))
        results.append({"backlinks": backlinks, "linked": linked, "top": top,
                        "scores": grouped(queries, ranks),
                        "strict": grouped(queries, strict)})  # fmt: skip
    return {"settings": results}


def compact(setting: dict[str, Any]) -> dict[str, Any]:
    """A grid setting with only its nDCG@10 per group (the whole grid's scores are 300 kB)."""
    return {
        **{name: setting[name] for name in ("backlinks", "linked", "top")},
        "ndcg@10": {g: round(s["ndcg@10"], 4) for g, s in setting["scores"].items()},
        "strict ndcg@10": {g: round(s["ndcg@10"], 4) for g, s in setting["strict"].items()},
    }


def engine_run(
    config: RaglineConfig, queries: list[SelfQuery], filters: SearchFilters, prior: LinksConfig
) -> dict[str, Any]:
    """The engine with and without ``prior``, queries interleaved (the order of the two
    alternating), on warm engines: nDCG@10 and search(k=10) milliseconds."""
    off = SearchEngine(config.model_copy(update={"search": config.search.model_copy(
        update={"links": prior.model_copy(update={"enabled": False})})}))  # fmt: skip
    on = SearchEngine(config.model_copy(update={"search": config.search.model_copy(
        update={"links": prior.model_copy(update={"enabled": True})})}))  # fmt: skip
    for engine in (off, on):  # warm: in-memory vectors, the link counts
        engine.search("warm up", k=K, filters=filters)
        engine.search("warm up again", k=K, filters=filters)
    ranks: dict[str, list[int | None]] = {"off": [], "on": []}
    ms: dict[str, list[float]] = {"off": [], "on": []}
    stage_ms: list[float] = []
    for i, query in enumerate(queries):
        order = [("off", off), ("on", on)] if i % 2 == 0 else [("on", on), ("off", off)]
        for name, engine in order:
            hits = engine.search(query.query, k=SEARCH_DEPTH, filters=filters, mode="hybrid").hits
            ranks[name].append(rank_of(query, hits))
        for name, engine in order:
            started = time.perf_counter()
            result = engine.search(query.query, k=K, filters=filters, mode="hybrid")
            ms[name].append((time.perf_counter() - started) * 1000)
            if name == "on":
                stage_ms.append(result.timings.get("links", 0.0))
    p50 = {name: statistics.median(values) for name, values in ms.items()}
    return {
        "links_stage_p50_ms": statistics.median(stage_ms),
        "prior": prior.model_dump(),
        "off": grouped(queries, ranks["off"]),
        "on": grouped(queries, ranks["on"]),
        "p50_ms": p50,
        "p50_ratio": p50["on"] / p50["off"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragline-link-prior"))
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        help="index only these notes (a glob; a quick check, not the result)",
    )
    args = parser.parse_args()
    config = load_config(build_index(args.work, args.include))
    started = time.perf_counter()
    queries = the_set(config)
    built_s = time.perf_counter() - started
    filters = SearchFilters(sources=(SOURCE,))
    engine = SearchEngine(config)
    engine.layout.link_counts_path.unlink(missing_ok=True)
    started = time.perf_counter()
    counts = engine.link_counts()  # built (and kept in a file)
    counts_s = time.perf_counter() - started
    reader = SearchEngine(config)
    started = time.perf_counter()
    reader.link_counts()  # what the next process does: read the file
    counts_read_s = time.perf_counter() - started
    grid = grid_search(engine, queries, filters)
    tuning = [s for s in grid["settings"]]
    best = max(tuning, key=lambda s: (s["scores"]["tuning"]["ndcg@10"], -s["backlinks"]))
    best_strict = max(
        tuning, key=lambda s: (s["strict"]["tuning"]["ndcg@10"], -s["backlinks"], -s["linked"])
    )
    baseline = next(s for s in tuning if s["backlinks"] == 0 and s["linked"] == 0)
    defaults = LinksConfig()
    picked = LinksConfig(backlinks=best["backlinks"], linked=best["linked"], top=best["top"])
    runs = [engine_run(config, queries, filters, picked)]
    if picked.model_dump(exclude={"enabled"}) != defaults.model_dump(exclude={"enabled"}):
        runs.append(engine_run(config, queries, filters, defaults))
    data = {
        "queries": Counter(f"{q.type}/{q.split}" for q in queries),
        "link_counts_s": counts_s,
        "link_counts_read_s": counts_read_s,
        "linked_documents": len(counts.backlinks),
        "set_build_s": built_s,
        "baseline": baseline["scores"],
        "best_on_tuning": best,
        "best_strict_on_tuning": best_strict,
        "grid": [compact(s) for s in grid["settings"]],
        "engine": runs,
    }
    (args.work / "link_prior.json").write_text(json.dumps(data, indent=1))
    save("link_prior", data, markdown(data), "python -m benchmarks.link_prior")


def markdown(data: dict[str, Any]) -> str:
    base, best = data["baseline"], data["best_on_tuning"]
    strict = data["best_strict_on_tuning"]
    queries = data["queries"]

    def row(name: str, group: str, s: dict[str, Any]) -> str:
        g = s[group]
        return (f"| {name} | {group} | {g['queries']} | {g['ndcg@10']:.4f} | "
                f"{g['recall@10']:.4f} | {g['mrr@10']:.4f} |")  # fmt: skip

    lines = [
        f"Hub link set: {sum(queries.values())} queries ({dict(sorted(queries.items()))}); "
        "`link`: the words around a wikilink, `anchor`: the alias of "
        "`[[target|alias]]`; the answer is the linked note, the linking note left out of "
        "the ranking. Hybrid search (z-score fusion, feedback on), bundled MiniLM.",
        "",
        "| ranking | queries | n | nDCG@10 | recall@10 | MRR@10 |",
        "|---|---|---|---|---|---|",
    ]
    for group in ("heldout", "tuning", "link/heldout", "anchor/heldout", "all"):
        if group not in base:
            continue
        lines.append(row("hybrid, no prior", group, base))
        name = f"prior {best['backlinks']}/{best['linked']}/top {best['top']}"
        lines.append(row(name, group, best["scores"]))
        lines.append(row(f"{name}, strict", group, best["strict"]))
        name = f"prior {strict['backlinks']}/{strict['linked']}/top {strict['top']}"
        lines.append(row(f"{name}, strict (picked strict)", group, strict["strict"]))
    lines += [
        "",
        "The prior's setting (backlinks/linked/top) picked on the tuning half from a grid "
        f"of {len(data['grid'])}; the held-out rows are the result. *Strict*: the linking "
        "note's chunks taken out of the candidates before the prior, so the link the query "
        "came from cannot count as a link from the top hits (the query's words are that "
        "note's, so it is usually among them): the gain a query not written from a "
        "linking note can expect.",
        "",
        "The engine itself, without and with the prior interleaved query by query on warm "
        "engines: nDCG@10 of `search(k=50)` (all queries, held-out half), p50 ms of "
        "`search(k=10)` and of its link stage alone:",
        "",
        "| prior (backlinks/linked/top) | nDCG@10 off | nDCG@10 on | held-out off | "
        "held-out on | p50 ms off | p50 ms on | ratio | link stage p50 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in data["engine"]:
        p = run["prior"]
        lines.append(
            f"| {p['backlinks']}/{p['linked']}/{p['top']} | {run['off']['all']['ndcg@10']:.4f} | "
            f"{run['on']['all']['ndcg@10']:.4f} | {run['off']['heldout']['ndcg@10']:.4f} | "
            f"{run['on']['heldout']['ndcg@10']:.4f} | {run['p50_ms']['off']:.1f} | "
            f"{run['p50_ms']['on']:.1f} | {run['p50_ratio']:.3f} | "
            f"{run['links_stage_p50_ms']:.2f} |"
        )
    lines += [
        "",
        f"The link counts ({data['linked_documents']} linked documents) are built once per "
        f"version of the documents table ({data['link_counts_s']:.2f} s here) and kept in "
        f"a file, which the next process reads ({data['link_counts_read_s']:.2f} s).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
