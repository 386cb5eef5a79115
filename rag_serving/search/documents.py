"""Whole-document BM25 in the keyword list: a chunk ranks by its document's score as
one text, plus a share of its own score, which also orders its document's chunks
(docs/decisions.md, "keyword side").

A question's words spread over an abstract's two or three chunks, each of which
scores only its own share; plain BM25 over whole documents does not split them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rag_serving.index.fulltext import Bm25Hit

# The chunk's own share beside its document's, both as shares of the best score
# (measured on the four BEIR dev sets: 0.2 against 0, 0.3, 0.5, 1; docs/decisions.md).
CHUNK_SHARE = 0.2


def with_document_scores(
    hits: Sequence[Bm25Hit], documents: Mapping[str, float], chunk_share: float = CHUNK_SHARE
) -> tuple[list[str], list[float]]:
    """``hits`` (one BM25 list of chunks) re-scored as their document's score over the
    best document's plus ``chunk_share`` times their own over the best chunk's: their
    chunk ids and scores, best first (ties keep the chunks' order). A chunk whose
    document has no row in the documents' index (code, commits, a book) is its own
    document: its own score over the best chunk's stands for the document's."""
    if not hits:
        return [], []
    best_chunk = max(hit.score for hit in hits) or 1.0
    best_document = max(documents.values(), default=0.0) or 1.0
    share = chunk_share / best_chunk
    score_of = documents.get
    scores = [
        (whole / best_document if (whole := score_of(hit.doc_key)) is not None
         else hit.score / best_chunk) + share * hit.score
        for hit in hits
    ]  # fmt: skip
    order = sorted(range(len(hits)), key=scores.__getitem__, reverse=True)  # stable
    return [hits[i].chunk_id for i in order], [scores[i] for i in order]
