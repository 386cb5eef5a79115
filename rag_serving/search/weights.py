"""The weights hybrid search gives its two lists for one query."""

from __future__ import annotations

import re

from rag_serving.config import SearchWeights

_LETTER = re.compile(r"[^\W\d_]")
_LATIN_LETTER = re.compile(r"[A-Za-z\u00aa\u00b5\u00ba\u00c0-\u024f\u1e00-\u1eff]")
FOREIGN_SCRIPT_NOTE = (
    "the query is mostly in a script the embedder was not trained on: "
    "the keyword list leads (weights swapped)"
)


def mostly_non_latin(text: str) -> bool:
    """Whether most of ``text``'s letters are in scripts other than Latin."""
    letters = len(_LETTER.findall(text))
    return letters > 0 and len(_LATIN_LETTER.findall(text)) * 2 < letters


def list_weights(query: str, weights: SearchWeights, multilingual: bool) -> tuple[float, float]:
    """(bm25, vector) weights for ``query``. An English-only embedder (the bundled
    MiniLM) places a Chinese, Arabic or Hindi query next to noise, so for a query
    mostly in another script the two weights swap and the keyword list leads
    (measured: benchmarks/multilingual_known_item.py)."""
    if multilingual or not mostly_non_latin(query):
        return weights.bm25, weights.vector
    return max(weights.bm25, weights.vector), min(weights.bm25, weights.vector)
