"""Deterministic, content-derived identifiers."""

from __future__ import annotations

import hashlib


def _digest(*parts: str, size: int = 32) -> str:
    h = hashlib.sha256()
    for part in parts:
        # A lone surrogate (a file name that is not UTF-8) must not fail a whole source.
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:size]


def doc_id(source: str, path: str) -> str:
    """Id of a document: its source and its path inside the source."""
    return _digest("doc", source, path)


def text_hash(text: str) -> str:
    """Hash of the exact text given to the embedder (the vector cache key)."""
    return _digest("text", text)


def chunk_id(document_id: str, embed_hash: str, occurrence: int) -> str:
    """Id of a chunk: its document, its text and which repeat of that text it is.

    An edit changes the ids of the edited chunks only; unchanged chunks keep theirs.
    """
    return _digest("chunk", document_id, embed_hash, str(occurrence))


def content_hash(data: bytes) -> str:
    """Hash of a file's bytes."""
    return hashlib.sha256(data).hexdigest()
