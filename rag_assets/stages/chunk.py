"""Stage 3 (``chunks``): cut new and changed documents into chunks that fit the
embedder's input (counted with its own tokenizer), with the kind's chunker.

Chunks are reused by content hash: a document whose content another document of the
source already has chunked with the same settings (a renamed or copied file) gets a copy
of those chunks under its own ids, so a renamed 50 MB PDF is not chunked again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa

from rag_assets.progress import report
from rag_assets.sources import DocumentView, SourceKind
from rag_assets.stages.result import StageResult, return_freed_memory
from rag_serving.config import ChunkingConfig
from rag_serving.embedders import Embedder
from rag_serving.index import schema as schemas
from rag_serving.index.ids import chunk_id, text_hash
from rag_serving.index.store import IndexStore
from rag_sources.chunking import MAX_HEADING_CHARS, Chunk, cap_heading_path, heading_anchor
from rag_sources.formats.model import Section
from rag_sources.where import sql_in, sql_string

READ_BATCH = 200  # documents read and chunked at a time
COMMIT_CHUNKS = 2048  # staged chunks per commit (whole documents)
_DOC_COLUMNS = [
    "doc_id", "source", "path", "title", "body", "body_start_line", "content_hash",
    "sections_json", "file_type",
]  # fmt: skip
_ROW_DOC_COLUMNS = ("doc_id", "source", "content_hash")  # what a chunk's row takes
_COPY_COLUMNS = [
    "doc_content_hash", "ordinal", "heading_path", "anchor", "line_start", "line_end", "text",
    "embed_text", "embed_hash", "token_count", "facets",
]  # fmt: skip


def chunk_budget(chunking: ChunkingConfig, embedder: Embedder) -> tuple[int, int]:
    """(target, max) chunk sizes in tokens; max never exceeds the embedder's input."""
    limit = embedder.max_tokens
    maximum = min(chunking.max_tokens or limit, limit)
    return min(chunking.target_tokens, maximum), maximum


def chunking_key(chunking: ChunkingConfig, embedder: Embedder, kind_version: str = "") -> str:
    """Identifies what chunk boundaries depend on: chunker versions (the shared one and
    the kind's own), tokenizer, sizes."""
    target, maximum = chunk_budget(chunking, embedder)
    fp = embedder.fingerprint
    key = f"{fp.chunker_version}|{fp.provider}|{fp.model}|{target}|{maximum}"
    if chunking.context != "headings":
        key += f"|context={chunking.context}"
    return text_hash(key + (f"|{kind_version}" if kind_version else ""))[:16]


def chunked_input(doc: dict[str, Any], chunking: ChunkingConfig) -> str:
    """What a document's chunks were made from: its content hash, and its title when
    the title leads the embedded text (a renamed note's title changes, its bytes do not)."""
    if chunking.context == "title" and doc.get("title"):
        return text_hash(f"{doc['content_hash']}\x1f{doc['title']}")
    return doc["content_hash"]


def chunk_source(
    store: IndexStore,
    kind: SourceKind,
    chunking: ChunkingConfig,
    embedder: Embedder,
    full: bool,
    batch_size: int = READ_BATCH,
    only: set[str] | None = None,
) -> StageResult:
    """Bring ``staged_chunks`` in line with ``documents`` for ``source`` (for the doc
    ids ``only``, when given: a watch run's changed items).

    Documents are read and chunked ``batch_size`` at a time and their chunks written
    about ``COMMIT_CHUNKS`` at a time, each document's old and new chunks swapped in
    one commit; only ids and hashes are kept for the whole source.
    """
    result = StageResult()
    source = kind.config
    scope = f"source = {sql_string(source.name)}"
    where = scope if only is None else f"{scope} AND {sql_in('doc_id', sorted(only))}"
    # Titles are read only where they lead the embedded text (every run reads this list).
    doc_columns = ["doc_id", "content_hash", *(["title"] if chunking.context == "title" else [])]
    docs = [
        {"doc_id": d["doc_id"], "content_hash": chunked_input(d, chunking)}
        for d in store.read("documents", where=where, columns=doc_columns).to_pylist()
    ]
    store.staged_chunks()  # opened as a writer: adds columns an older index lacks
    staged = store.read(
        "staged_chunks", where=where, columns=["doc_id", "doc_content_hash", "chunking_key"]
    )
    key = chunking_key(chunking, embedder, kind.chunker_version())
    chunked_hash: dict[str, str] = {}
    known: set[str] = set()
    columns = (staged.column(c).to_pylist() for c in ("doc_id", "doc_content_hash", "chunking_key"))
    for doc_id, digest, their_key in zip(*columns, strict=True):
        known.add(doc_id)
        if their_key == key:
            chunked_hash[doc_id] = digest
    del staged
    live = {doc["doc_id"] for doc in docs}
    todo = [d["doc_id"] for d in docs if full or chunked_hash.get(d["doc_id"]) != d["content_hash"]]
    wanted = set(todo)
    todo_hashes = {d["content_hash"] for d in docs if d["doc_id"] in wanted}
    # Redone although their content is what was chunked (a full rebuild).
    same_content = {
        d["doc_id"]
        for d in docs
        if d["doc_id"] in wanted and chunked_hash.get(d["doc_id"]) == d["content_hash"]
    }
    del wanted
    del docs, chunked_hash
    donors = {} if full else _chunked_elsewhere(store, scope, todo_hashes, key)
    result.unchanged = len(live) - len(todo)
    gone = [d for d in known if d not in live]
    result.deleted = len(gone)
    target, maximum = chunk_budget(chunking, embedder)
    heading_chars = source.limits.max_heading_chars
    # Chunks of the documents in ``pending_ids`` (rows are made as they are written).
    pending: list[tuple[dict[str, Any], list[Chunk]]] = []
    pending_ids: list[str] = []
    pending_chunks = 0
    written = 0
    for start in range(0, len(todo), batch_size):
        ids = todo[start : start + batch_size]
        where = sql_in("doc_id", ids)
        for doc in store.read("documents", where=where, columns=_DOC_COLUMNS).to_pylist():
            doc["content_hash"] = chunked_input(doc, chunking)
            donor = donors.get(doc["content_hash"])
            if donor is not None and donor != doc["doc_id"]:
                pieces = _copied_chunks(store, donor)
                result.extra["reused_chunkings"] = int(result.extra.get("reused_chunkings", 0)) + 1
            else:
                view = _view(doc, heading_chars, chunking.context == "title")
                pieces = kind.chunk(view, embedder.count_tokens, target, maximum)
            pending.append(({k: doc[k] for k in _ROW_DOC_COLUMNS}, pieces))
            pending_chunks += len(pieces)
            if not pieces:
                result.skipped += 1  # nothing to embed (empty body); re-checked each run
            elif doc["doc_id"] in same_content:
                result.rebuilt += 1
            elif doc["doc_id"] in known:
                result.changed += 1
            else:
                result.new += 1
        pending_ids.extend(ids)  # a document that vanished meanwhile loses its chunks
        if pending_chunks >= COMMIT_CHUNKS:
            written += _write(store, scope, pending, pending_ids, key, heading_chars)
            pending, pending_ids, pending_chunks = [], [], 0
        report(source.name, "chunk", min(start + batch_size, len(todo)), len(todo))
    if pending or pending_ids or gone:
        written += _write(store, scope, pending, pending_ids + gone, key, heading_chars)
    result.row_count = store.count("staged_chunks", scope)
    result.extra["chunks_written"] = written
    return_freed_memory()
    return result


def _write(
    store: IndexStore,
    scope: str,
    pending: list[tuple[dict[str, Any], list[Chunk]]],
    doc_ids: list[str],
    key: str,
    heading_chars: int,
) -> int:
    """Upsert the chunks of ``pending`` and delete the other chunks of ``doc_ids``, in
    one commit; rows are made ``COMMIT_CHUNKS`` at a time as LanceDB reads them."""
    count = sum(len(pieces) for _, pieces in pending)
    store.apply_changes(
        "staged_chunks",
        schemas.STAGED_CHUNKS,
        row_batches(pending, key, COMMIT_CHUNKS, heading_chars) if count else None,
        delete_where=f"{scope} AND {sql_in('doc_id', doc_ids)}",
    )
    return count


def row_batches(
    pending: list[tuple[dict[str, Any], list[Chunk]]],
    key: str,
    size: int,
    heading_chars: int = MAX_HEADING_CHARS,
) -> Iterator[pa.RecordBatch]:
    """The staged rows of ``pending``'s chunks as record batches of at most ``size``
    rows: a document of 70,000 chunks is never in memory as rows all at once."""
    rows: list[dict[str, Any]] = []
    for doc, pieces in pending:
        for row in _chunk_rows(doc, pieces, key, heading_chars):
            rows.append(row)
            if len(rows) >= size:
                yield pa.RecordBatch.from_pylist(rows, schemas.STAGED_CHUNKS)
                rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schemas.STAGED_CHUNKS)


def _view(doc: dict[str, Any], max_heading_chars: int, titled: bool) -> DocumentView:
    """The document as its kind's chunker reads it; the headings its parser gave its
    sections (a PDF's outline, an EPUB's chapter titles, a commit's subject) capped
    at the source's ``max_heading_chars``: every chunk of a section carries them. With
    ``titled``, the document's title leads each chunk's embedded context line."""
    sections = [
        replace(s, heading_path=cap_heading_path(s.heading_path, max_heading_chars))
        for s in map(Section.from_json, json.loads(doc["sections_json"] or "[]"))
    ]
    return DocumentView(
        key=doc["path"],
        body=doc["body"] or "",
        body_start_line=int(doc["body_start_line"] or 1),
        sections=sections,
        file_type=doc["file_type"],
        title=(doc["title"] or "") if titled else "",
    )


def _chunked_elsewhere(store: IndexStore, scope: str, hashes: set[str], key: str) -> dict[str, str]:
    """content hash → a document of this source whose chunks for it are staged with
    ``key``: copying them is cheaper than chunking again. (Only this source: another
    kind may chunk the same bytes its own way.)"""
    found: dict[str, str] = {}
    ordered = sorted(h for h in hashes if h)
    for start in range(0, len(ordered), 500):
        hashes_in = sql_in("doc_content_hash", ordered[start : start + 500])
        where = f"{scope} AND {hashes_in} AND ordinal = 0"
        rows = store.read(
            "staged_chunks", where=where, columns=["doc_id", "doc_content_hash", "chunking_key"]
        )
        for row in rows.to_pylist():
            if row["chunking_key"] == key:
                found.setdefault(row["doc_content_hash"], row["doc_id"])
    return found


def _copied_chunks(store: IndexStore, donor: str) -> list[Chunk]:
    rows = store.read(
        "staged_chunks", where=f"doc_id = {sql_string(donor)}", columns=_COPY_COLUMNS
    ).to_pylist()
    return [
        Chunk(
            ordinal=r["ordinal"],
            heading_path=list(r["heading_path"] or []),
            text=r["text"],
            embed_text=r["embed_text"],
            line_start=r["line_start"],
            line_end=r["line_end"],
            token_count=r["token_count"],
            anchor=r["anchor"] or "",
            facets=tuple(r["facets"] or ()),
        )
        for r in sorted(rows, key=lambda r: r["ordinal"])
    ]


def _chunk_rows(
    doc: dict[str, Any], pieces: list[Any], key: str, heading_chars: int
) -> Iterator[dict[str, Any]]:
    occurrences: dict[str, int] = {}
    for piece in pieces:
        digest = text_hash(piece.embed_text)
        occurrence = occurrences.get(digest, 0)
        occurrences[digest] = occurrence + 1
        yield {
            "chunk_id": chunk_id(doc["doc_id"], digest, occurrence),
            "doc_id": doc["doc_id"],
            "source": doc["source"],
            "ordinal": piece.ordinal,
            "heading_path": list(piece.heading_path),
            "anchor": piece.anchor or heading_anchor(list(piece.heading_path), heading_chars),
            "line_start": piece.line_start,
            "line_end": piece.line_end,
            "text": piece.text,
            "embed_text": piece.embed_text,
            "embed_hash": digest,
            "token_count": piece.token_count,
            "doc_content_hash": doc["content_hash"],
            "chunking_key": key,
            "facets": list(piece.facets),
        }
