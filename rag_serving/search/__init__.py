"""Hybrid search: vector + BM25 fused with weighted RRF."""

from rag_serving.search.engine import SearchEngine, SearchHit, SearchResult, hybrid_search
from rag_serving.search.filters import SearchFilters

__all__ = ["SearchEngine", "SearchFilters", "SearchHit", "SearchResult", "hybrid_search"]
