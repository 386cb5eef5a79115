"""The bare components of a warm search, timed without ragline's search layer, in
the same run as the searches they are compared with (query_latency, scale_latency).

A search of mode ``hybrid`` embeds the query, takes the top ``candidates`` of the
vector search and of BM25, fuses them, and makes snippets for the ``k`` hits it
returns; ``vector`` and ``bm25`` take the top ``2·k`` of their one list. The bare
components are those library calls alone, at the same depths:

- the query embedding (the engine's ONNX session);
- the vector search the engine would run: the exact numpy scan of the vectors a
  warm engine holds (below the vector-index threshold, one BLAS thread), else
  LanceDB's indexed search with the engine's probe and refine settings;
- Tantivy BM25 top-N (the query parsed, searched, the chunk ids read);
- Tantivy's snippet generator over the returned hits' stored rows.

Each is timed two ways: *isolated*, one component over all queries before the next
(its caches stay warm), and *in sequence*, the components of one query back to back
as a search runs them, with nothing of ragline between them. In sequence the
embedding runs after the previous query's scan has streamed the vector matrix
through the CPU caches (and the scan after the model has), so both are slower than
isolated; that cost belongs to the components, not to the search layer.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

Component = Callable[[str], Any]


def _vector_search(engine: Any, vectors: dict[str, np.ndarray], depth: int) -> Component:
    """The vector search a warm ``engine`` runs, as bare library calls."""
    from rag_serving.search.vectors import _one_blas_thread

    matrix = engine._memory._matrix  # the vectors the warm engine holds, if it does
    if matrix is not None and matrix.vectors is not None:

        def scan(query: str) -> list[str]:
            with _one_blas_thread():
                sims = matrix.vectors @ vectors[query]
            top = np.argpartition(-sims, depth - 1)[:depth]
            return [matrix.ids[i] for i in top[np.argsort(-sims[top])]]

        return scan
    table = engine.store.chunks(engine.generation.table)

    def indexed(query: str) -> list[str]:
        search = table.search(vectors[query]).distance_type("cosine")
        search = engine._with_index_params(search, table, filtered=False)
        return search.select(["chunk_id", "_distance"]).limit(depth).to_arrow()

    return indexed


def _snippets(engine: Any, queries: list[str], k: int) -> Component:
    """Tantivy's snippet generator over each query's returned hits (rows fetched
    beforehand): the query parsed for highlighting, a generator, a snippet per hit."""
    import tantivy

    from rag_serving.index.fulltext import SCHEMA

    fulltext = engine.fulltext
    searcher = fulltext.index.searcher()
    docs: dict[str, list[Any]] = {}
    for query in queries:
        ids = [hit.chunk_id for hit in engine.search(query, k=k, mode="hybrid").hits]
        found = searcher.search(tantivy.Query.term_set_query(SCHEMA, "chunk_id", ids), len(ids))
        docs[query] = [searcher.doc(address) for _score, address in found.hits]
    fields = fulltext._query_fields(searcher)

    from rag_serving.index import fulltext as module

    def snippets(query: str) -> None:
        parsed = fulltext._user_query(query, fields, snippets=True)
        words = module._WORD.findall(module.fold_compatibility(query))
        fulltext._highlights(searcher, parsed, docs[query], 220, words)

    return snippets


def bare_components(engine: Any, queries: list[str], k: int = 10) -> dict[str, Any]:
    """p50 ms of each bare component (isolated) and, per mode, the p50 of its
    components run in sequence; the sum of the isolated p50s per mode."""
    try:
        from rag_serving.index.filters import SearchFilters
    except ImportError:  # a revision before the filters moved (revision_compare.py)
        from rag_serving.search.filters import SearchFilters  # type: ignore[no-redef]

    fused = max(engine.config.search.candidates, k)
    served = 2 * k
    embedder = engine.embedder
    vectors = {q: np.asarray(embedder.embed_query(q), dtype=np.float32) for q in queries}
    components: dict[str, Component] = {
        "embed": embedder.embed_query,
        f"vector top-{fused}": _vector_search(engine, vectors, fused),
        f"vector top-{served}": _vector_search(engine, vectors, served),
        f"bm25 top-{fused}": lambda q: engine.fulltext.search(q, SearchFilters(), fused),
        f"bm25 top-{served}": lambda q: engine.fulltext.search(q, SearchFilters(), served),
        f"snippets of {k} hits": _snippets(engine, queries, k),
    }
    modes = {
        "hybrid": ["embed", f"vector top-{fused}", f"bm25 top-{fused}", f"snippets of {k} hits"],
        "vector": ["embed", f"vector top-{served}", f"snippets of {k} hits"],
        "bm25": [f"bm25 top-{served}", f"snippets of {k} hits"],
    }
    isolated = {name: _p50(timed(fn, queries)) for name, fn in components.items()}
    in_sequence: dict[str, float] = {}
    for mode, names in modes.items():
        steps = [components[name] for name in names]
        in_sequence[mode] = _p50(timed(lambda q, steps=steps: [s(q) for s in steps], queries))
    return {
        "isolated_p50_ms": isolated,
        "modes": {mode: names for mode, names in modes.items()},
        "isolated_sum_p50_ms": {
            mode: round(sum(isolated[n] for n in names), 2) for mode, names in modes.items()
        },
        "in_sequence_p50_ms": in_sequence,
    }


def timed(fn: Component, queries: list[str]) -> list[float]:
    """Milliseconds per call of ``fn`` on each query."""
    out = []
    for query in queries:
        started = time.perf_counter()
        fn(query)
        out.append((time.perf_counter() - started) * 1000)
    return out


def _p50(values: list[float]) -> float:
    return round(statistics.median(values), 3)
