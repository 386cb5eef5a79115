"""``fragment`` queries: a document's most distinctive run of words → that document."""

from __future__ import annotations

from typing import Any

from rag_serving.evaluation.self_eval.headings import _heading_key
from rag_serving.evaluation.self_eval.queries import Corpus, SelfQuery, Vocabulary, _hash
from rag_serving.evaluation.self_eval.words import (
    _FRAGMENT_CHARS,
    _FRAGMENT_WORDS,
    _MAX_WORD_CHARS,
    _SEGMENT_BREAK,
    join_tokens,
    readable,
    terms,
    tokens,
)


def fragment_queries(corpus: Corpus, vocabulary: Vocabulary) -> list[SelfQuery]:
    """Each document's most distinctive fragment → that document."""
    best: dict[str, tuple[float, str, dict[str, Any]]] = {}
    for chunk in corpus.chunks:
        found = distinctive_fragment(chunk["text"] or "", vocabulary, chunk["doc_id"])
        if found is None:
            continue
        score, text = found
        current = best.get(chunk["doc_id"])
        # Ties go to the smaller hash, so the choice does not depend on row order.
        if current is None or (score, _hash(current[1])) > (current[0], _hash(text)):
            best[chunk["doc_id"]] = (score, text, chunk)
    queries = []
    for doc_id, (_score, text, chunk) in best.items():
        title = _heading_key(chunk.get("title") or "")
        if _heading_key(text) == title:
            continue
        queries.append(SelfQuery.make("fragment", chunk["source"], text, doc_id, chunk["path"]))
    return queries


def distinctive_fragment(
    text: str, vocabulary: Vocabulary, doc_id: str
) -> tuple[float, str] | None:
    """The window of ``text`` whose terms are rarest (mean inverse document frequency)
    among the windows that only document ``doc_id`` holds every rare term of (text
    quoted in another note names no single answer); None when there is none."""
    best: tuple[float, str] | None = None
    for segment in _SEGMENT_BREAK.split(readable(text)):
        toks = [t for t in tokens(segment) if len(t.text) <= _MAX_WORD_CHARS]
        if not toks:
            continue
        chars = sum(t.char for t in toks)
        low, high = _FRAGMENT_CHARS if chars * 2 > len(toks) else _FRAGMENT_WORDS
        if len(toks) < low:
            continue
        size = min(high, len(toks))
        for begin in range(len(toks) - size + 1):
            window = toks[begin : begin + size]
            if not any(t.text[0].isalpha() or t.char for t in window):
                continue
            query = join_tokens(window)
            found = terms(query)
            score = vocabulary.mean_idf(found)
            if best is not None and (score, _hash(best[1])) <= (best[0], _hash(query)):
                continue
            if vocabulary.only_in(found) == doc_id:
                best = (score, query)
    return best
