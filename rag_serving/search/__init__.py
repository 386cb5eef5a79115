"""Hybrid search: vector + BM25, fused by a weighted sum of standardised scores
(z-score; min-max and weighted RRF on request: ``[search] fusion``).

Names are resolved lazily: importing ``rag_serving.search`` for its filters does not
load the engine (LanceDB, Tantivy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_serving.index.filters import SearchFilters
    from rag_serving.search.engine import SearchEngine, SearchHit, SearchResult, hybrid_search

__all__ = ["SearchEngine", "SearchFilters", "SearchHit", "SearchResult", "hybrid_search"]


def __getattr__(name: str) -> Any:
    if name == "SearchFilters":
        from rag_serving.index import filters

        return filters.SearchFilters
    if name in {"SearchEngine", "SearchHit", "SearchResult", "hybrid_search"}:
        from rag_serving.search import engine

        return getattr(engine, name)
    raise AttributeError(name)
