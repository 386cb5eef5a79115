"""Pseudo-relevance feedback and document-level vector signals for issue 14,
measured offline on the score matrices of benchmarks/fusion_lab.py.

    python benchmarks/feedback_lab.py [--eval-root /tmp/ragline-eval] [--sets cosqa,...]
        [--no-bm25-prf] [--hub-config /tmp/ragline-bench/hub.toml]

Each variant changes one or both of the engine's lists and fuses them again the way
the engine does (z-score, BM25 weight 0.3, lists 200 deep, the BM25 list's
statistics padded with unmatched chunks at 0); documents are ranked by their best
chunk, as ``ragline eval`` does. The default is measured in the same run.

- vector PRF (Rocchio): q' = q + β·mean(top-m chunk vectors) of the first fused or
  vector list; either a second exact scan over every chunk ("rescan") or only the
  first vector list's candidates re-scored ("rescore", no new chunk can enter);
- BM25 PRF (RM3-style): the query plus the top terms of the top-m chunks of the
  first BM25 or fused list, each boosted by α·p(t)/max p (p: term frequency in the
  feedback chunks times idf), searched again through the engine's own Tantivy index;
- both sides fed back from the fused list;
- a document-level vector signal: a chunk's cosine mixed with its document's mean.

The extra query-time cost of each kind is timed on the hub index (35k chunks).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.beir_sets import SETS
from benchmarks.fusion_lab import LabSet, ndcg10, table, top_mask
from benchmarks.report import save

DEPTH = 200
W_BM25 = 0.3
_WORD = re.compile(r"\w+")

# ---- the engine's fusion on matrices ----------------------------------------------------


def _bm25_terms(bm25: np.ndarray, matched: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, spread) of each query's BM25 list as the engine computes them: its top
    ``DEPTH`` scores, padded with 0 up to ``DEPTH`` when fewer chunks matched."""
    top = top_mask(bm25, DEPTH, matched)
    n = top.sum(axis=1)
    s = np.where(top, bm25, 0.0).astype(np.float64)
    mean = s.sum(axis=1) / DEPTH
    var = (np.where(top, (s - mean[:, None]) ** 2, 0.0).sum(axis=1) + (DEPTH - n) * mean**2) / DEPTH
    low = np.where(n >= DEPTH, np.where(top, s, np.inf).min(axis=1), 0.0)
    return top, np.stack([low, np.sqrt(var)], axis=1)


def fuse(
    bm25: np.ndarray,
    matched: np.ndarray,
    cosine: np.ndarray,
    v_top: np.ndarray | None = None,
    w_bm25: float = W_BM25,
) -> np.ndarray:
    """The engine's z-score fusion; ``v_top``: the vector list's members (default: the
    ``DEPTH`` best by ``cosine``)."""
    b_top, (stats) = _bm25_terms(bm25, matched)
    low_b, sd_b = stats[:, 0:1], stats[:, 1:2]
    b = (bm25 - low_b) / np.where(sd_b > 0, sd_b, 1.0)
    if v_top is None:
        v_top = top_mask(cosine, DEPTH)
    v = np.where(v_top, cosine, np.nan)
    low_v = np.nanmin(v, axis=1, keepdims=True)
    sd_v = np.nanstd(v, axis=1, keepdims=True)
    vn = (cosine - low_v) / np.where(sd_v > 0, sd_v, 1.0)
    out = np.where(b_top, w_bm25 * b, 0.0) + np.where(v_top, vn, 0.0)
    return np.where(b_top | v_top, out, -np.inf)


def first_lists(lab: LabSet) -> dict[str, np.ndarray]:
    return {
        "fused": fuse(lab.bm25, lab.matched, lab.cosine),
        "vector": lab.cosine,
        "bm25": np.where(lab.matched, lab.bm25, -np.inf),
    }


def top_rows(scores: np.ndarray, m: int) -> np.ndarray:
    """Each query's ``m`` best chunk indices, best first."""
    idx = np.argpartition(-scores, m - 1, axis=1)[:, :m]
    order = np.argsort(-np.take_along_axis(scores, idx, axis=1), axis=1)
    return np.take_along_axis(idx, order, axis=1)


# ---- vector feedback ---------------------------------------------------------------------


def rocchio_cosine(lab: LabSet, top: np.ndarray, beta: float) -> np.ndarray:
    """cos(q + β·mean(v_top), v) for every chunk, from the stored cosines (|q| = 1)."""
    centroid = lab.vectors[top].mean(axis=1)
    q_dot_c = np.take_along_axis(lab.cosine, top, axis=1).mean(axis=1)
    norm = np.sqrt(1 + 2 * beta * q_dot_c + beta**2 * (centroid**2).sum(axis=1))
    return ((lab.cosine + beta * centroid @ lab.vectors.T) / norm[:, None]).astype(np.float32)


def vector_prf(source: str, m: int, beta: float, rescan: bool) -> Callable[[LabSet], np.ndarray]:
    def run(lab: LabSet) -> np.ndarray:
        top = top_rows(lab.first[source], m)
        cosine = rocchio_cosine(lab, top, beta)
        v_top = None if rescan else top_mask(lab.cosine, DEPTH)
        return fuse(lab.bm25, lab.matched, cosine, v_top)

    return run


def doc_mean_vector(gamma: float) -> Callable[[LabSet], np.ndarray]:
    """A chunk's cosine mixed with the mean cosine of its document's chunks."""

    def run(lab: LabSet) -> np.ndarray:
        counts = np.bincount(lab.chunk_doc, minlength=lab.n_docs)
        sums = np.stack([np.bincount(lab.chunk_doc, row, lab.n_docs) for row in lab.cosine])
        mean = (sums / np.maximum(counts, 1))[:, lab.chunk_doc]
        cosine = ((1 - gamma) * lab.cosine + gamma * mean).astype(np.float32)
        return fuse(lab.bm25, lab.matched, cosine)

    return run


def softmax_rescore(m: int, beta: float, temperature: float) -> Callable[[LabSet], np.ndarray]:
    """Re-score of the vector list's candidates with q + β·Σ w_i v_i / Σ w_i over the
    fused top ``m``, w_i = exp((s_i - s_1) / T) (what rag_serving/search/feedback.py
    does; the norm of q' is left out: the z-score fusion does not see a list's scale)."""

    def run(lab: LabSet) -> np.ndarray:
        top = top_rows(lab.first["fused"], m)
        s = np.take_along_axis(lab.first["fused"], top, axis=1)
        w = np.exp((s - s[:, :1]) / temperature)
        centroid = (lab.vectors[top] * w[..., None]).sum(axis=1) / w.sum(axis=1, keepdims=True)
        cosine = lab.cosine + beta * centroid @ lab.vectors.T
        return fuse(lab.bm25, lab.matched, cosine, top_mask(lab.cosine, DEPTH))

    return run


def query_vectors(lab: LabSet) -> np.ndarray:
    if not hasattr(lab, "query_vectors"):
        q = np.stack([lab.engine.embedder.embed_query(t) for t in lab.queries])
        lab.query_vectors = q / np.linalg.norm(q, axis=1, keepdims=True)  # type: ignore[attr-defined]
        assert np.allclose(lab.query_vectors @ lab.vectors[:50].T, lab.cosine[:, :50], atol=1e-4)  # type: ignore[attr-defined]
    return lab.query_vectors  # type: ignore[attr-defined]


def module_ranker(top: int, weight: float, temperature: float) -> Callable[[LabSet], np.ndarray]:
    """The engine's own lists (RankedList, zscore_fusion) per query, fed back through
    ``rescored_list`` of rag_serving/search/feedback.py: the module, end to end."""
    from rag_serving.search.feedback import FeedbackSettings, rescored_list
    from rag_serving.search.fusion import RankedList, zscore_fusion

    settings = FeedbackSettings(top=top, weight=weight, temperature=temperature)

    def run(lab: LabSet) -> np.ndarray:
        queries = query_vectors(lab)
        out = np.full(lab.cosine.shape, -np.inf)
        b_rows = top_rows(np.where(lab.matched, lab.bm25, -np.inf), DEPTH)
        v_rows = top_rows(lab.cosine, DEPTH)
        n = lab.cosine.shape[1]

        for qi in range(len(queries)):
            b = [int(i) for i in b_rows[qi] if lab.matched[qi, i]]
            bm25 = RankedList("bm25", [str(i) for i in b], [float(lab.bm25[qi, i]) for i in b],
                              W_BM25, floor=0.0, depth=min(DEPTH, n))  # fmt: skip
            vector = RankedList("vector", [str(i) for i in v_rows[qi]],
                                [float(lab.cosine[qi, i]) for i in v_rows[qi]], 1.0)  # fmt: skip
            lists = [bm25, vector] if b else [vector]
            first = zscore_fusion(lists, settings.top)
            rescored = rescored_list(vector, lab.vectors[v_rows[qi]], first, queries[qi], settings)
            if rescored is not None:
                lists[-1] = rescored
            for hit in zscore_fusion(lists):
                out[qi, int(hit.id)] = hit.score
        return out

    return run


def per_query(lab: LabSet, scores: np.ndarray) -> np.ndarray:
    from rag_serving.evaluation.metrics import ndcg_at_k

    values = []
    for qi, query_id in enumerate(lab.query_ids):
        row = scores[qi]
        order = np.argsort(-row, kind="stable")[:400]
        order = order[np.isfinite(row[order])]
        ranking = list(dict.fromkeys(lab.doc_ids[lab.chunk_doc[c]] for c in order))[:100]
        values.append(ndcg_at_k(ranking, lab.dataset.qrels[query_id], 10))
    return np.array(values)


# ---- BM25 feedback -----------------------------------------------------------------------


class TermStats:
    """Chunk texts as stemmed term counts, document frequencies, and per stem its most
    frequent surface word (what the expanded query string carries)."""

    def __init__(self, lab: LabSet):
        from rag_serving.index.analysis import _analyzer

        analyzer = _analyzer("english")
        assert lab.engine.generation is not None
        rows = lab.engine.store.read(
            lab.engine.generation.table, columns=["chunk_id", "title", "text"]
        ).to_pylist()
        by_id = {r["chunk_id"]: r for r in rows}
        stem_of: dict[str, str | None] = {}
        surface: dict[str, Counter] = {}
        self.counts: list[Counter] = []
        df: Counter = Counter()
        for cid in lab.chunk_ids:
            row = by_id[cid]
            c: Counter = Counter()
            for word in _WORD.findall(f"{row['title'] or ''} {row['text'] or ''}".lower()):
                if word not in stem_of:
                    stems = analyzer.analyze(word)
                    stem_of[word] = stems[0] if len(stems) == 1 else None
                stem = stem_of[word]
                if stem is None or word.isdigit() or len(word) < 3:
                    continue
                c[stem] += 1
                surface.setdefault(stem, Counter())[word] += 1
            self.counts.append(c)
            df.update(c.keys())
        n = len(lab.chunk_ids)
        self.idf = {t: float(np.log((n - d + 0.5) / (d + 0.5) + 1)) for t, d in df.items()}
        self.word = {t: s.most_common(1)[0][0] for t, s in surface.items()}

    def expansion(self, top: list[int], n_terms: int) -> list[tuple[str, float]]:
        """The ``n_terms`` best (word, weight ∈ (0, 1]) of the feedback chunks."""
        p: Counter = Counter()
        for i in top:
            c = self.counts[i]
            total = sum(c.values()) or 1
            for t, f in c.items():
                p[t] += f / total * self.idf[t]
        best = p.most_common(n_terms)
        if not best:
            return []
        high = best[0][1]
        return [(self.word[t], w / high) for t, w in best]


def expanded_query(query: str, terms: list[tuple[str, float]], alpha: float) -> str:
    own = {w.lower() for w in _WORD.findall(query)}
    extra = [f"{w}^{alpha * s:.3f}" for w, s in terms if w not in own]
    return " ".join([" ".join(_WORD.findall(query)), *extra])


def bm25_prf_matrix(
    lab: LabSet, stats: TermStats, source: str, m: int, n_terms: int, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    from rag_serving.index.filters import SearchFilters

    position = {cid: i for i, cid in enumerate(lab.chunk_ids)}
    top = top_rows(lab.first[source], m)
    bm25 = np.zeros(lab.bm25.shape, dtype=np.float32)
    for qi, text in enumerate(lab.queries):
        rows = [int(i) for i in top[qi] if np.isfinite(lab.first[source][qi, i])]
        query = expanded_query(text, stats.expansion(rows, n_terms), alpha)
        for hit in lab.engine.fulltext.search(query, SearchFilters(), 2 * DEPTH):
            bm25[qi, position[hit.chunk_id]] = hit.score
    return bm25, bm25 > 0


# ---- query-time cost on the hub index ------------------------------------------------------


def hub_costs(config_path: Path, rounds: int = 60) -> dict[str, float]:
    """Median extra milliseconds per query at the hub's size: a second exact scan,
    a re-score of 200 candidates, a document mean over every chunk, and a BM25 query
    expanded by 10 terms against the plain one (texts of 5 hits analysed)."""
    from rag_serving.config import parse_config_file
    from rag_serving.index.analysis import _analyzer
    from rag_serving.index.filters import SearchFilters
    from rag_serving.search import SearchEngine
    from rag_serving.search.vectors import _one_blas_thread

    engine = SearchEngine(parse_config_file(config_path), read_consistency_s=None)
    queries = ["how do I sync notes between devices", "calendar plugin weekly view",
               "export a vault to pdf", "dataview query for tasks due today",
               "keyboard shortcut to open the command palette", "git backup plugin settings"]  # fmt: skip
    for q in queries:
        engine.search(q)  # warm: matrix, analyzers, caches
    matrix = engine._memory._matrix
    assert matrix is not None, "the hub engine does not hold its vectors in memory"
    vectors = matrix.vectors
    doc = np.unique(np.asarray(matrix.rows.column("doc_id").to_pylist()), return_inverse=True)[1]
    texts = matrix.rows.column("text").to_pylist() if "text" in matrix.rows.column_names else []
    analyzer = _analyzer("english")
    times: dict[str, list[float]] = {k: [] for k in ("rescan", "rescore", "docmean", "bm25", "bm25_expanded")}  # fmt: skip
    rng = np.random.default_rng(0)
    for r in range(rounds):
        q = rng.standard_normal(vectors.shape[1]).astype(np.float32)
        q /= np.linalg.norm(q)
        with _one_blas_thread():
            sims = vectors @ q
            top = np.argpartition(-sims, 199)[:200]
            t = time.perf_counter()
            q2 = q + 0.5 * vectors[top[:5]].mean(axis=0)
            sims2 = vectors @ (q2 / np.linalg.norm(q2))
            np.argpartition(-sims2, 199)[:200]
            times["rescan"].append(time.perf_counter() - t)
            t = time.perf_counter()
            q2 = q + 0.5 * vectors[top[:5]].mean(axis=0)
            vectors[top] @ (q2 / np.linalg.norm(q2))
            times["rescore"].append(time.perf_counter() - t)
        t = time.perf_counter()
        np.bincount(doc, sims) / np.maximum(np.bincount(doc), 1)
        times["docmean"].append(time.perf_counter() - t)
        text = queries[r % len(queries)]
        t = time.perf_counter()
        hits = engine.fulltext.search(text, SearchFilters(), DEPTH)
        times["bm25"].append(time.perf_counter() - t)
        t = time.perf_counter()
        words: Counter = Counter()
        for i in top[:5]:
            if texts:
                words.update(analyzer.analyze(texts[int(i)] or ""))
        extra = [w for w, _ in words.most_common(10)] or ["plugin"] * 10
        engine.fulltext.search(
            text + " " + " ".join(f"{w}^0.3" for w in extra), SearchFilters(), DEPTH
        )
        times["bm25_expanded"].append(time.perf_counter() - t)
        del hits
    med = {k: 1000 * float(np.median(v)) for k, v in times.items()}
    med["bm25_prf_extra"] = med["bm25_expanded"]  # a second query on top of the first
    med["chunks"] = float(len(matrix.ids))
    return med


def feedback_engine(config_path: Path, settings_kwargs: dict[str, float]):
    """A SearchEngine with the proposed hook (feedback between two fusions) and a plain
    one, on the same config. The hook is what the engine would run; the query vector
    is taken from the embedder's call (the engine itself would keep it)."""
    from rag_serving.config import SearchConfig, parse_config_file
    from rag_serving.search import SearchEngine
    from rag_serving.search.feedback import FeedbackSettings, rescored_list

    settings = FeedbackSettings(**settings_kwargs)  # type: ignore[arg-type]

    class FeedbackEngine(SearchEngine):
        query_vector: np.ndarray | None = None

        def _fuse(self, lists, limit):  # type: ignore[no-untyped-def]
            vector = lists[-1] if lists and lists[-1].name == "vector" else None
            matrix = self._memory._matrix
            if len(lists) < 2 or vector is None or matrix is None or self.query_vector is None:
                return super()._fuse(lists, limit)
            first = super()._fuse(lists, settings.top)

            # What InMemoryVectors.search would hand over with its ids.
            candidates = matrix.vectors[[matrix.positions[i] for i in vector.ids]]
            rescored = rescored_list(vector, candidates, first, self.query_vector, settings)
            if rescored is not None:
                lists = [*lists[:-1], rescored]
            return super()._fuse(lists, limit)

    config = parse_config_file(config_path)
    # The default search settings (the eval folders' own configs say rrf, 50, 1 / 1).
    search = SearchConfig(rerank=config.search.rerank)
    config = config.model_copy(update={"search": search})
    assert (search.fusion, search.candidates, search.weights.bm25) == ("zscore", DEPTH, W_BM25)
    plain = SearchEngine(config, read_consistency_s=None)
    fed = FeedbackEngine(config, read_consistency_s=None)
    embedder = fed.embedder
    own = embedder.embed_query

    def keep(text: str) -> np.ndarray:
        fed.query_vector = own(text)
        return fed.query_vector

    embedder.embed_query = keep  # type: ignore[method-assign]
    return plain, fed


def end_to_end(names: list[str], root: Path, settings_kwargs: dict[str, float]) -> dict:
    """nDCG@10 through ``rank_documents`` of `ragline eval` (k = 100 chunks a query),
    the plain engine and the one with the hook, on the same index."""
    import json

    from benchmarks.report import SHARED_DATA
    from rag_serving.evaluation.beir import load_beir
    from rag_serving.evaluation.metrics import ndcg_at_k
    from ragline.eval_command import rank_documents

    rows: dict[str, list[float]] = {"plain engine (default)": [], "engine with the hook": []}
    for name in names:
        dataset = load_beir(SHARED_DATA / "eval" / name, SETS[name])
        notes = json.loads((root / name / "eval-state.json").read_text())["notes"]
        plain, fed = feedback_engine(root / name / "ragline.toml", settings_kwargs)
        for engine, label in ((plain, "plain engine (default)"), (fed, "engine with the hook")):
            scores = [
                ndcg_at_k(rank_documents(engine, dataset.queries[q], "hybrid", notes),
                          dataset.qrels[q], 10)
                for q in dataset.judged_queries()
            ]  # fmt: skip
            rows[label].append(float(np.mean(scores)))
        print(
            name, rows["plain engine (default)"][-1], rows["engine with the hook"][-1], flush=True
        )
    return rows


def hub_latency(config_path: Path, settings_kwargs: dict[str, float], count: int = 200) -> dict:
    """Hybrid p50 / p95 (ms) at the hub's size, plain and with the hook, interleaved."""
    from benchmarks.query_latency import sample_queries

    plain, fed = feedback_engine(config_path, settings_kwargs)
    assert plain.generation is not None
    queries = sample_queries(plain.store, plain.generation.table, count)
    for q in queries[:5]:
        plain.search(q), plain.search(q), fed.search(q), fed.search(q)
    times: dict[str, list[float]] = {"plain": [], "feedback": []}
    for i, q in enumerate(queries * 2):
        order = [("plain", plain), ("feedback", fed)][:: 1 if i % 2 else -1]
        for label, engine in order:
            t = time.perf_counter()
            engine.search(q)
            times[label].append(1000 * (time.perf_counter() - t))
    out = {f"{k} p50": float(np.percentile(v, 50)) for k, v in times.items()}
    out |= {f"{k} p95": float(np.percentile(v, 95)) for k, v in times.items()}
    out["paired median extra"] = float(
        np.median(np.array(times["feedback"]) - np.array(times["plain"]))
    )
    out["queries"] = len(queries) * 2
    return out


# ---- the report --------------------------------------------------------------------------


def measure(labs: list[LabSet], rankers: dict[str, Callable[[LabSet], np.ndarray]]) -> dict:
    rows = {}
    for label, ranker in rankers.items():
        rows[label] = [ndcg10(lab, ranker(lab)) for lab in labs]
        print(f"{label:<60}" + "".join(f"{c:8.4f}" for c in rows[label]), flush=True)
    return rows


CHOSEN = {"top": 3, "weight": 0.3, "temperature": 1.0}  # rag_serving/search/feedback.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eval-root", type=Path, default=Path("/tmp/ragline-eval"))
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--no-bm25-prf", action="store_true")
    parser.add_argument("--no-end-to-end", action="store_true")
    parser.add_argument("--hub-config", type=Path, default=Path("/tmp/ragline-bench/hub.toml"))
    args = parser.parse_args()
    names = args.sets.split(",")
    labs = [LabSet(name, args.eval_root) for name in names]
    for lab in labs:
        lab.first = first_lists(lab)  # type: ignore[attr-defined]
    default_label = "default (z-score, bm25 0.3, depth 200)"
    default: dict[str, Callable[[LabSet], np.ndarray]] = {default_label: lambda lab: lab.first["fused"]}  # fmt: skip
    sections: dict[str, dict[str, list[float]]] = {}
    print(" " * 60 + "".join(f"{n[:8]:>8}" for n in names))

    rankers = dict(default)
    for source in ("fused", "vector"):
        for m in (3, 5, 10):
            for beta in (0.3, 0.5, 1.0):
                for rescan in (True, False):
                    how = "rescan" if rescan else "rescore"
                    rankers[f"vector PRF {how}, {source} top-{m}, β={beta}"] = vector_prf(
                        source, m, beta, rescan
                    )
    sections["Vector PRF (Rocchio, plain mean of the top m): a second scan or a re-score"] = (
        measure(labs, rankers)
    )

    rankers = dict(default)
    for m in (1, 2, 3, 5, 10):
        for beta in (0.1, 0.2, 0.3, 0.4):
            for temperature in (0.5, 1.0, 2.0, float("inf")):
                t = "plain mean" if temperature == float("inf") else f"softmax T={temperature}"
                rankers[f"re-score, fused top-{m}, β={beta}, {t}"] = softmax_rescore(
                    m, beta, temperature
                )
    chosen = "the module end to end: fused top-3, β=0.3, softmax T=1 (proposed)"
    rankers[chosen] = module_ranker(**CHOSEN)
    sections[
        "Vector PRF re-scoring the candidates, fed-back hits weighted by their fused score"
    ] = measure(labs, rankers)
    wins = []
    for lab in labs:
        delta = per_query(lab, module_ranker(**CHOSEN)(lab)) - per_query(lab, lab.first["fused"])
        wins.append((lab.name, int((delta > 1e-9).sum()), int((delta < -1e-9).sum()),
                     float(delta.mean() / (delta.std(ddof=1) / np.sqrt(len(delta))))))  # fmt: skip
    print("queries better / worse / paired t:", wins)

    rankers = dict(default)
    for gamma in (0.1, 0.2, 0.3, 0.5):
        rankers[f"cosine mixed with its document's mean, γ={gamma}"] = doc_mean_vector(gamma)
    sections["Document-level vector signal"] = measure(labs, rankers)

    if not args.no_bm25_prf:
        rows = measure(labs, dict(default))
        only = {"bm25 only": [ndcg10(lab, lab.first["bm25"]) for lab in labs]}
        stats = {lab.name: TermStats(lab) for lab in labs}
        for source in ("bm25", "fused"):
            for m in (3, 5, 10):
                for n_terms, alpha in ((10, 0.3), (10, 0.5), (20, 0.3)):
                    label = f"BM25 PRF, {source} top-{m}, {n_terms} terms, α={alpha}"
                    cells, alone = [], []
                    for lab in labs:
                        bm25, matched = bm25_prf_matrix(
                            lab, stats[lab.name], source, m, n_terms, alpha
                        )
                        lab.prf = (bm25, matched)  # type: ignore[attr-defined]
                        cells.append(ndcg10(lab, fuse(bm25, matched, lab.cosine)))
                        alone.append(ndcg10(lab, np.where(matched, bm25, -np.inf)))
                    rows[label] = cells
                    if source == "bm25":
                        only[f"bm25 mode: {label}"] = alone
                    print(f"{label:<60}" + "".join(f"{c:8.4f}" for c in cells), flush=True)
                    if source == "fused" and n_terms == 10 and alpha == 0.3:
                        both = f"both sides from fused top-{m} (BM25 as above; vector rescan β=0.5)"
                        rows[both] = [
                            ndcg10(lab, fuse(*lab.prf, rocchio_cosine(
                                lab, top_rows(lab.first["fused"], m), 0.5)))
                            for lab in labs
                        ]  # fmt: skip
                        print(f"{both:<60}" + "".join(f"{c:8.4f}" for c in rows[both]), flush=True)
        sections["BM25 pseudo-relevance feedback (RM3-style expansion), and both sides"] = rows
        sections["BM25 mode with BM25 feedback (bm25 list alone)"] = only
        for label, cells in only.items():
            print(f"{label:<60}" + "".join(f"{c:8.4f}" for c in cells), flush=True)

    if not args.no_end_to_end:
        sections["End to end: `ragline eval`'s ranking through SearchEngine with the hook"] = (
            end_to_end(names, args.eval_root, CHOSEN)
        )
    costs = hub_costs(args.hub_config) if args.hub_config.is_file() else {}
    print("hub costs (ms):", costs)
    latency = hub_latency(args.hub_config, CHOSEN) if args.hub_config.is_file() else {}
    print("hub latency (ms):", latency)
    lines = [
        "nDCG@10 from the engine's lists on the `ragline eval` indexes (benchmarks/"
        "feedback_lab.py; z-score fusion as the engine does it, documents by their best "
        "chunk). Splits: "
        + ", ".join(
            f"{n} {SETS[n]} ({len(lab.query_ids)} queries)"
            for n, lab in zip(names, labs, strict=True)
        )
        + ".",
        "",
    ]
    for title, rows in sections.items():
        lines += table(title, rows, names)
    lines += [
        "Proposed (fused top 3, β 0.3, softmax T 1) against the default, per query — "
        "better / worse / paired t: "
        + "; ".join(f"{n} {b} / {w} / {t:.2f}" for n, b, w, t in wins) + ".",
        "",
    ]  # fmt: skip
    if costs:
        lines += [
            f"Extra query-time cost at {int(costs['chunks'])} chunks (hub index, median ms): "
            f"second exact scan {costs['rescan']:.2f}, re-score of 200 candidates "
            f"{costs['rescore']:.3f}, document mean over every chunk {costs['docmean']:.2f}, "
            f"BM25 query {costs['bm25']:.2f} and the same expanded by 10 terms (with the "
            f"analysis of 5 hits) {costs['bm25_expanded']:.2f}.",
            "",
        ]
    if latency:
        lines += [
            f"Hybrid search on the hub index, {latency['queries']} queries, plain and with "
            f"the proposed hook interleaved in one process: p50 {latency['plain p50']:.2f} / "
            f"{latency['feedback p50']:.2f} ms, p95 {latency['plain p95']:.2f} / "
            f"{latency['feedback p95']:.2f} ms, paired median extra "
            f"{latency['paired median extra']:.2f} ms.",
            "",
        ]
    save("feedback_lab", {"ndcg@10": sections, "sets": names, "costs_ms": costs,
                          "latency_ms": latency, "per_query": wins},
         "\n".join(lines), "python benchmarks/feedback_lab.py")  # fmt: skip


if __name__ == "__main__":
    main()
