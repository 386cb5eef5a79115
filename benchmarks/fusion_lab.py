"""Every ranking idea tried for issue 5, measured offline on complete score lists.

    python benchmarks/fusion_lab.py [--eval-root /tmp/ragline-eval] [--sets cosqa,...]
        [--chunk-roots 128=/tmp/ragline-eval-t128,256=/tmp/ragline-eval-t256]

For each BEIR set indexed by ``ragline eval --data-dir <eval-root>/<set>``, every
judged query is scored once against *every* chunk through the engine's own parts:
BM25 from the Tantivy index (``FulltextIndex.search``, no limit) and cosine
similarity of the query embedder's vector with the vectors stored in LanceDB. The
matrices are cached (``<eval-root>/<set>/lab-scores.npz``); each idea is then a pure
function of them, so trying one costs milliseconds. Documents are ranked by their
best chunk, as ``ragline eval`` does. Ideas that need other scores (another BM25
analyser, pseudo-relevance feedback, another chunk size) compute those the same way.
The chosen setting is re-measured end to end by benchmarks/fusion_experiments.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.beir_sets import SETS, TARGETS
from benchmarks.report import SHARED_DATA, save

# ---- the score matrices --------------------------------------------------------


class LabSet:
    """Per judged query: BM25 and cosine scores of every chunk, and chunk → doc."""

    def __init__(self, name: str, root: Path):
        from rag_serving.config import parse_config_file
        from rag_serving.evaluation.beir import load_beir
        from rag_serving.search import SearchEngine

        self.name = name
        self.work = root / name
        self.dataset = load_beir(SHARED_DATA / "eval" / name, SETS[name])
        self.query_ids = self.dataset.judged_queries()
        self.queries = [self.dataset.queries[q] for q in self.query_ids]
        self.engine = SearchEngine(
            parse_config_file(self.work / "ragline.toml"), read_consistency_s=None
        )
        cache = self.work / "lab-scores.npz"
        if not cache.is_file():
            self._compute(cache)
        data = np.load(cache, allow_pickle=False)
        self.chunk_ids = list(data["chunk_ids"])
        self.bm25 = data["bm25"]  # queries × chunks, 0 where no term matched
        self.matched = data["matched"]  # queries × chunks: BM25 matched
        self.cosine = data["cosine"]  # queries × chunks
        self.vectors = data["vectors"]  # chunks × dimension, unit length
        self.chunk_doc = data["chunk_doc"]  # chunk → document index
        self.doc_ids = list(data["doc_ids"])
        self.n_docs = len(self.doc_ids)

    def _compute(self, cache: Path) -> None:
        from rag_serving.index.filters import SearchFilters

        engine = self.engine
        assert engine.generation is not None
        notes = json.loads((self.work / "eval-state.json").read_text())["notes"]
        table = engine.store.read(engine.generation.table, columns=["chunk_id", "path", "vector"])
        chunk_ids = table.column("chunk_id").to_pylist()
        doc_ids = sorted(set(notes.values()))
        doc_index = {d: i for i, d in enumerate(doc_ids)}
        chunk_doc = np.array([doc_index[notes[p]] for p in table.column("path").to_pylist()])
        vectors = np.stack(table.column("vector").to_numpy(zero_copy_only=False))
        vectors = vectors.astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        bm25, matched = bm25_matrix(
            lambda text: engine.fulltext.search(text, SearchFilters(), len(chunk_ids)),
            self.queries,
            chunk_ids,
        )
        queries = np.stack([engine.embedder.embed_query(q) for q in self.queries])
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        np.savez_compressed(
            cache, chunk_ids=np.array(chunk_ids), bm25=bm25, matched=matched,
            cosine=(queries @ vectors.T).astype(np.float32), vectors=vectors,
            chunk_doc=chunk_doc, doc_ids=np.array(doc_ids),
        )  # fmt: skip


def bm25_matrix(
    search: Callable[[str], list], queries: list[str], chunk_ids: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    position = {cid: i for i, cid in enumerate(chunk_ids)}
    bm25 = np.zeros((len(queries), len(chunk_ids)), dtype=np.float32)
    for qi, text in enumerate(queries):
        for hit in search(text):
            bm25[qi, position[hit.chunk_id]] = hit.score
    return bm25, bm25 > 0


# ---- evaluation -------------------------------------------------------------------

Scores = np.ndarray  # queries × chunks; -inf = not retrieved
Ranker = Callable[["LabSet"], Scores]


def ndcg10(lab: LabSet, chunk_scores: Scores) -> float:
    """Mean nDCG@10 of the documents ranked by their best chunk."""
    from rag_serving.evaluation.metrics import ndcg_at_k

    total = 0.0
    for qi, query_id in enumerate(lab.query_ids):
        row = chunk_scores[qi]
        order = np.argsort(-row, kind="stable")[:400]
        order = order[np.isfinite(row[order])]
        ranking = list(dict.fromkeys(lab.doc_ids[lab.chunk_doc[c]] for c in order))[:100]
        total += ndcg_at_k(ranking, lab.dataset.qrels[query_id], 10)
    return total / len(lab.query_ids)


def top_mask(scores: np.ndarray, depth: int, valid: np.ndarray | None = None) -> np.ndarray:
    """True for each query's ``depth`` best chunks (among ``valid``)."""
    s = np.where(valid, scores, -np.inf) if valid is not None else scores
    depth = min(depth, s.shape[1])
    idx = np.argpartition(-s, depth - 1, axis=1)[:, :depth]
    mask = np.zeros(s.shape, dtype=bool)
    np.put_along_axis(mask, idx, True, axis=1)
    return mask & np.isfinite(s)


def normalised(scores: np.ndarray, fit: np.ndarray, use: np.ndarray, norm: str) -> np.ndarray:
    """``(s - min) / scale`` with min and scale (range or std) taken over ``fit``;
    0 outside ``use`` (the worst retrieved value, as in the engine)."""
    s = np.where(fit, scores, np.nan)
    low = np.nanmin(s, axis=1, keepdims=True)
    if norm == "minmax":
        scale = np.nanmax(s, axis=1, keepdims=True) - low
    else:
        scale = np.nanstd(s, axis=1, keepdims=True)
    out = (scores - low) / np.where(scale > 0, scale, 1.0)
    return np.where(use, np.nan_to_num(out, nan=0.0), 0.0)


def single(kind: str) -> Ranker:
    def run(lab: LabSet) -> Scores:
        return np.where(lab.matched, lab.bm25, -np.inf) if kind == "bm25" else lab.cosine

    return run


def weighted_sum(
    w_bm25: float, depth: int = 200, norm: str = "zscore", complete: bool = False
) -> Ranker:
    """The engine's convex (min-max) / zscore fusion over each list's top ``depth``;
    ``complete``: ids missing from one list get their true score there instead of 0."""

    def run(lab: LabSet) -> Scores:
        b_top = top_mask(lab.bm25, depth, lab.matched)
        v_top = top_mask(lab.cosine, depth)
        union = b_top | v_top
        b = normalised(lab.bm25, b_top, (union & lab.matched) if complete else b_top, norm)
        v = normalised(lab.cosine, v_top, union if complete else v_top, norm)
        return np.where(union, w_bm25 * b + v, -np.inf)

    return run


def rrf(w_bm25: float, k: int = 60, depth: int = 200) -> Ranker:
    def run(lab: LabSet) -> Scores:
        out = np.zeros(lab.cosine.shape)
        union = np.zeros(lab.cosine.shape, dtype=bool)
        for scores, valid, weight in ((lab.bm25, lab.matched, w_bm25), (lab.cosine, None, 1.0)):
            mask = top_mask(scores, depth, valid)
            ranks = np.argsort(np.argsort(-np.where(mask, scores, -np.inf), axis=1), axis=1) + 1
            out += np.where(mask, weight / (k + ranks), 0.0)
            union |= mask
        return np.where(union, out, -np.inf)

    return run


def document_level(w_bm25: float, depth: int = 200) -> Ranker:
    """Each list collapsed to documents (best chunk) before a zscore fusion, so a
    document's BM25 chunk and vector chunk add up; chunks ranked by their document."""

    def run(lab: LabSet) -> Scores:
        out = np.full(lab.cosine.shape, -np.inf)
        for qi in range(len(lab.query_ids)):
            total = np.zeros(lab.n_docs)
            seen = np.zeros(lab.n_docs, dtype=bool)
            for scores, weight in (
                (np.where(lab.matched[qi], lab.bm25[qi], -np.inf), w_bm25),
                (lab.cosine[qi].astype(float), 1.0),
            ):
                per_doc = np.full(lab.n_docs, -np.inf)
                np.maximum.at(per_doc, lab.chunk_doc, scores)
                top = np.argsort(-per_doc)[:depth]
                top = top[np.isfinite(per_doc[top])]
                if len(top):
                    spread = per_doc[top].std() or 1.0
                    total[top] += weight * (per_doc[top] - per_doc[top].min()) / spread
                    seen[top] = True
            out[qi] = np.where(
                seen[lab.chunk_doc], total[lab.chunk_doc] + 1e-6 * lab.cosine[qi], -np.inf
            )
        return out

    return run


def adaptive(w_bm25: float, depth: int = 200) -> Ranker:
    """zscore fusion with the BM25 weight scaled per query by a score-distribution
    confidence (query performance prediction): how far each list's top score stands
    above the rest of its list, in standard deviations, BM25's over the vector's."""

    def confidence(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
        s = np.where(mask, scores, np.nan)
        top = np.nanmax(s, axis=1)
        return np.nan_to_num((top - np.nanmean(s, 1)) / np.maximum(np.nanstd(s, 1), 1e-9))

    def run(lab: LabSet) -> Scores:
        b_top = top_mask(lab.bm25, depth, lab.matched)
        v_top = top_mask(lab.cosine, depth)
        ratio = confidence(lab.bm25, b_top) / np.maximum(confidence(lab.cosine, v_top), 1e-9)
        b = normalised(lab.bm25, b_top, b_top, "zscore")
        v = normalised(lab.cosine, v_top, v_top, "zscore")
        return np.where(b_top | v_top, w_bm25 * ratio[:, None] * b + v, -np.inf)

    return run


def with_dense_prf(first: Ranker, m: int, beta: float, then: Ranker) -> Ranker:
    """Rocchio feedback on the query vector: q' = q + β·mean(top-m chunk vectors of
    the first fused ranking); cosine recomputed with q', then fused again."""

    def run(lab: LabSet) -> Scores:
        top = np.argsort(-first(lab), axis=1)[:, :m]
        centroid = lab.vectors[top].mean(axis=1)  # queries × dim
        # cos(q', v) = (cos(q, v) + β c·v) / |q + βc|, with |q| = 1 and q·c = mean cos
        q_dot_c = np.take_along_axis(lab.cosine, top, axis=1).mean(axis=1)
        norm = np.sqrt(1 + 2 * beta * q_dot_c + beta**2 * (centroid**2).sum(axis=1))
        cosine = (lab.cosine + beta * centroid @ lab.vectors.T) / norm[:, None]
        original = lab.cosine
        lab.cosine = cosine.astype(np.float32)
        try:
            return then(lab)
        finally:
            lab.cosine = original

    return run


# ---- BM25 analysers -----------------------------------------------------------------


def analysed_bm25(lab: LabSet, stem: bool, stop: bool) -> tuple[np.ndarray, np.ndarray]:
    """BM25 over title and text with another Tantivy analyser (a side index)."""
    import tantivy

    from rag_serving.index.fulltext import _WORD

    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    builder = builder.filter(tantivy.Filter.remove_long(40)).filter(tantivy.Filter.lowercase())
    if stop:
        builder = builder.filter(tantivy.Filter.stopword("english"))
    if stem:
        builder = builder.filter(tantivy.Filter.stemmer("english"))
    schema = tantivy.SchemaBuilder()
    schema.add_text_field("chunk_id", stored=True, tokenizer_name="raw")
    schema.add_text_field("title", tokenizer_name="lab")
    schema.add_text_field("text", tokenizer_name="lab")
    folder = Path(tempfile.mkdtemp(prefix="ragline-lab-"))
    try:
        index = tantivy.Index(schema.build(), path=str(folder))
        index.register_tokenizer("lab", builder.build())
        writer = index.writer(heap_size=64_000_000, num_threads=1)
        assert lab.engine.generation is not None
        rows = lab.engine.store.read(
            lab.engine.generation.table, columns=["chunk_id", "title", "text"]
        ).to_pylist()
        for row in rows:
            writer.add_document(tantivy.Document(**{k: v or "" for k, v in row.items()}))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        searcher = index.searcher()

        class Hit:
            def __init__(self, chunk_id: str, score: float):
                self.chunk_id, self.score = chunk_id, score

        def search(text: str) -> list[Hit]:
            words = " ".join(_WORD.findall(text))
            if not words:
                return []
            query, _ = index.parse_query_lenient(words, default_field_names=["title", "text"])
            hits = searcher.search(query, limit=len(rows), count=False).hits
            return [Hit(searcher.doc(a)["chunk_id"][0], s) for s, a in hits]

        return bm25_matrix(search, lab.queries, lab.chunk_ids)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---- the report ---------------------------------------------------------------------


def table(title: str, rows: dict[str, list[float]], names: list[str]) -> list[str]:
    lines = [f"**{title}**", "", "| setting | " + " | ".join(names) + " | mean |",
             "|---|" + "---|" * (len(names) + 1)]  # fmt: skip
    for label, cells in rows.items():
        marked = [
            "—" if np.isnan(c) else f"{c:.4f}{' ✓' if c >= TARGETS[n] else ''}"
            for c, n in zip(cells, names, strict=True)
        ]
        mean = "—" if np.isnan(cells).any() else f"{np.mean(cells):.4f}"
        lines.append(f"| {label} | " + " | ".join(marked) + f" | {mean} |")
    return [*lines, ""]


def measure(labs: list[LabSet], rankers: dict[str, Ranker]) -> dict[str, list[float]]:
    rows = {}
    for label, ranker in rankers.items():
        rows[label] = [ndcg10(lab, ranker(lab)) for lab in labs]
        print(f"{label:<52}" + "".join(f"{c:9.4f}" for c in rows[label]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--eval-root", type=Path, default=Path("/tmp/ragline-eval"))
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument(
        "--chunk-roots", default="", help="TOKENS=EVAL_ROOT,... (other chunk sizes)"
    )
    args = parser.parse_args()
    names = args.sets.split(",")
    labs = [LabSet(name, args.eval_root) for name in names]
    default = weighted_sum(0.3, 200, "zscore")
    sections: dict[str, dict[str, list[float]]] = {}

    print("fusion functions, weights and depth")
    fusion: dict[str, Ranker] = {"bm25 only": single("bm25"), "vector only": single("vector"),
                                 "rrf k=60, equal, depth 200": rrf(1.0)}  # fmt: skip
    for depth in (50, 100, 200):
        for w in (0.3, 0.4, 0.5, 0.7, 1.0):
            fusion[f"min-max, bm25 {w}, depth {depth}"] = weighted_sum(w, depth, "minmax")
            fusion[f"zscore, bm25 {w}, depth {depth}"] = weighted_sum(w, depth, "zscore")
    for w in (0.3, 0.4, 0.5):
        fusion[f"zscore, bm25 {w}, depth 200, complete scores"] = weighted_sum(w, complete=True)
        fusion[f"min-max, bm25 {w}, depth 200, complete scores"] = weighted_sum(
            w, norm="minmax", complete=True
        )
    sections["Fusion function, BM25 weight (vector 1.0), candidate depth"] = measure(labs, fusion)

    print("document-level fusion, adaptive weights, dense PRF")
    other: dict[str, Ranker] = {"zscore 0.3 depth 200 (default)": default}
    for w in (0.3, 0.5):
        other[f"document-level zscore, bm25 {w}"] = document_level(w)
        other[f"adaptive (top-score confidence ratio), bm25 {w}"] = adaptive(w)
    for m in (3, 5, 10):
        for beta in (0.5, 1.0):
            other[f"dense PRF m={m} β={beta}, then default"] = with_dense_prf(
                default, m, beta, default
            )
    sections[
        "Document-level fusion, per-query adaptive weights, dense pseudo-relevance feedback"
    ] = measure(labs, other)

    print("BM25 analysers")
    analysers: dict[str, list[float]] = {}
    engine_bm25 = {lab.name: (lab.bm25, lab.matched) for lab in labs}
    for label, stem, stop in (("en_stem (as indexed)", True, False),
                              ("en_stem + English stop words", True, True),
                              ("no stemming + stop words", False, True)):  # fmt: skip
        for lab in labs:
            lab.bm25, lab.matched = analysed_bm25(lab, stem, stop)
        analysers[f"{label}: bm25 only"] = measure(labs, {label: single("bm25")})[label]
        analysers[f"{label}: default fusion"] = measure(labs, {label: default})[label]
    for lab in labs:
        lab.bm25, lab.matched = engine_bm25[lab.name]
    sections["BM25 analyser (title + text fields only, side index)"] = analysers

    if args.chunk_roots:
        print("chunk size")
        sizes: dict[str, list[float]] = {
            "180 tokens (default): vector only": sections[
                "Fusion function, BM25 weight (vector 1.0), candidate depth"
            ]["vector only"],
            "180 tokens (default): default fusion": sections[
                "Document-level fusion, per-query adaptive weights, dense pseudo-relevance feedback"
            ]["zscore 0.3 depth 200 (default)"],
        }
        for spec in args.chunk_roots.split(","):
            tokens, root = spec.split("=", 1)
            built = [n for n in names if (Path(root) / n / "eval-state.json").is_file()]
            chunk_labs = [LabSet(name, Path(root)) for name in built]
            for label, ranker in (("vector only", single("vector")), ("default fusion", default)):
                key = f"{tokens} tokens: {label}"
                got = dict(zip(built, measure(chunk_labs, {key: ranker})[key], strict=True))
                sizes[key] = [got.get(n, float("nan")) for n in names]
        sections["Chunk size (target tokens; each a separate index)"] = sizes

    lines = [
        "nDCG@10 from complete score matrices (benchmarks/fusion_lab.py); ✓ = issue 5 target "
        "met. Splits: " + ", ".join(f"{n} {SETS[n]} ({len(lab.query_ids)} queries)"
                                    for n, lab in zip(names, labs, strict=True)) + ".",
        "",
    ]  # fmt: skip
    for title, rows in sections.items():
        lines += table(title, rows, names)
    save("fusion_lab", {"ndcg@10": {t: r for t, r in sections.items()}, "sets": names},
         "\n".join(lines), "make bench-quality (this step: python benchmarks/fusion_lab.py "
         "--chunk-roots 128=/tmp/ragline-eval-t128,256=/tmp/ragline-eval-t256)")  # fmt: skip


if __name__ == "__main__":
    main()
