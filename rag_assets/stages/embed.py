"""Stage 4 (``embeddings``): give every staged chunk a vector and publish it to
the served ``chunks`` table.

Vectors are reused by the hash of the embedded text (same embedder), so an edit
re-embeds only the chunks whose text changed and a rename re-embeds nothing.
Chunks are published a few documents at a time, each document's old and new
chunks swapped in one commit: a search never sees half of a document.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from rag_assets.progress import report
from rag_assets.stages.result import StageResult, utcnow
from rag_serving.config import MarkdownSourceConfig
from rag_serving.embedders import Embedder
from rag_serving.index.manifest import Generation, read_manifest, write_manifest
from rag_serving.index.schema import chunks_schema
from rag_serving.index.store import IndexStore, sql_in, sql_string
from rag_serving.search.filters import expand_tags

PUBLISH_BATCH = 1024  # chunks per commit (whole documents)
_ROW_FIELDS = (
    "doc_id", "source", "kind", "path", "title", "heading", "anchor", "ordinal",
    "line_start", "line_end", "text", "embed_hash", "tags", "modified",
)  # fmt: skip


def target_generation(store: IndexStore, embedder: Embedder) -> Generation:
    """The generation this embedder's vectors go to, recorded in the manifest.

    The first embedder makes the active generation. A different embedder later
    starts (or continues) a building generation; search keeps using the active one
    until the building one holds every source (see ``promote_if_complete``).
    """
    path = store.layout.manifest_path
    manifest = read_manifest(path, missing_ok=True)
    generation = manifest.target_for(embedder.fingerprint)
    updated = manifest.with_target(generation)
    if updated != manifest:
        write_manifest(path, updated)
    return generation


def embed_source(
    store: IndexStore, source: MarkdownSourceConfig, embedder: Embedder, full: bool
) -> StageResult:
    """Bring the source's served chunks (in the embedder's generation) in line with
    ``staged_chunks``."""
    generation = target_generation(store, embedder)
    table = generation.table
    result = StageResult()
    result.extra["generation"] = generation.key
    scope = f"source = {sql_string(source.name)}"
    docs = {
        d["doc_id"]: d
        for d in store.read(
            "documents",
            where=scope,
            columns=["doc_id", "kind", "path", "title", "tags", "modified"],
        ).to_pylist()
    }
    current = {
        r["chunk_id"]: r["row_hash"]
        for r in _read_chunks(store, table, scope, ["chunk_id", "row_hash"])
    }
    wanted: dict[str, dict[str, Any]] = {}
    for staged in store.read("staged_chunks", where=scope).to_pylist():
        doc = docs.get(staged["doc_id"])
        if doc is not None:  # a document deleted since chunking: its chunks go
            row = _served_row(staged, doc)
            wanted[row["chunk_id"]] = row
    to_write = [r for cid, r in wanted.items() if full or current.get(cid) != r["row_hash"]]
    stale = [cid for cid in current if cid not in wanted]
    result.new = sum(1 for r in to_write if r["chunk_id"] not in current)
    result.changed = len(to_write) - result.new
    result.unchanged = len(wanted) - len(to_write)
    result.deleted = len(stale)

    schema = chunks_schema(embedder.dimension)
    store.chunks(table, embedder.dimension)  # create it even when the source is empty
    # Which texts already have a vector in this generation (hashes only, read once).
    known_hashes = {r["embed_hash"] for r in _read_chunks(store, table, None, ["embed_hash"])}
    embedded = reused = done = 0
    for batch_docs, rows in _batches_by_document(to_write):
        vectors, fresh = _vectors_for(store, table, embedder, rows, known_hashes)
        known_hashes.update(r["embed_hash"] for r in rows)
        embedded += fresh
        reused += len(rows) - fresh
        now = utcnow()
        for row, vector in zip(rows, vectors, strict=True):
            row["vector"] = vector
            row["indexed_at"] = now
        store.apply_changes(
            table,
            schema,
            pa.Table.from_pylist(rows, schema),
            delete_where=f"{scope} AND {sql_in('doc_id', batch_docs)}",
            compare_columns=("row_hash",) if not full else (),
        )
        done += len(rows)
        report(source.name, "embed", done, len(to_write))
    if stale:  # chunks of deleted documents, and chunks a changed document lost
        store.delete(table, f"{scope} AND {sql_in('chunk_id', stale)}")
    embedder.prepare_query_path()
    result.row_count = store.count(table, scope)
    result.extra.update({"embedded": embedded, "vectors_reused": reused})
    return result


def _read_chunks(
    store: IndexStore, table: str, where: str | None, columns: list[str]
) -> list[dict[str, Any]]:
    if not store.table_exists(table):
        return []
    return store.read(table, where=where, columns=columns).to_pylist()


def _served_row(staged: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    row = {
        "chunk_id": staged["chunk_id"],
        "doc_id": staged["doc_id"],
        "source": staged["source"],
        "kind": doc["kind"],
        "path": doc["path"],
        "title": doc["title"],
        "heading": " > ".join(staged["heading_path"] or []),
        "anchor": staged["anchor"],
        "ordinal": staged["ordinal"],
        "line_start": staged["line_start"],
        "line_end": staged["line_end"],
        "text": staged["text"],
        "embed_hash": staged["embed_hash"],
        "tags": expand_tags(list(doc["tags"] or [])),
        "modified": doc["modified"],
        "embed_text": staged["embed_text"],
    }
    row["row_hash"] = _row_hash(row)
    return row


def _row_hash(row: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for name in _ROW_FIELDS:
        h.update(repr(row[name]).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:32]


def _batches_by_document(
    rows: list[dict[str, Any]],
) -> Iterator[tuple[list[str], list[dict[str, Any]]]]:
    by_doc: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_doc.setdefault(row["doc_id"], []).append(row)
    batch_docs: list[str] = []
    batch_rows: list[dict[str, Any]] = []
    for doc_id, doc_rows in by_doc.items():
        batch_docs.append(doc_id)
        batch_rows.extend(doc_rows)
        if len(batch_rows) >= PUBLISH_BATCH:
            yield batch_docs, batch_rows
            batch_docs, batch_rows = [], []
    if batch_rows:
        yield batch_docs, batch_rows


def _vectors_for(
    store: IndexStore,
    table: str,
    embedder: Embedder,
    rows: list[dict[str, Any]],
    known_hashes: set[str],
) -> tuple[list[np.ndarray], int]:
    """Vectors for ``rows``: reused by embed_hash where the index has one, else
    embedded. Returns the vectors and how many were freshly embedded."""
    hashes = list({r["embed_hash"] for r in rows} & known_hashes)
    known: dict[str, np.ndarray] = {}
    if hashes:
        for r in _read_chunks(store, table, sql_in("embed_hash", hashes), ["embed_hash", "vector"]):
            known.setdefault(r["embed_hash"], np.asarray(r["vector"], dtype=np.float32))
    missing: dict[str, str] = {}
    for r in rows:
        if r["embed_hash"] not in known:
            missing.setdefault(r["embed_hash"], r["embed_text"])
    if missing:
        vectors = embedder.embed_documents(list(missing.values()))
        known.update(zip(missing.keys(), vectors, strict=True))
    return [known[r["embed_hash"]] for r in rows], len(missing)
