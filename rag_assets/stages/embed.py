"""Stage 4 (``embeddings``): give every staged chunk a vector and publish it to
the served ``chunks`` table.

Vectors are reused by the hash of the embedded text (same embedder), so an edit
re-embeds only the chunks whose text changed and a rename re-embeds nothing.
Chunks are published a few documents at a time, each document's old and new
chunks swapped in one commit: a search never sees half of a document. Vectors are
made before the commit, outside the index's commit lock, so that several sources
embed at once while their commits take turns.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rag_assets.progress import report
from rag_assets.stages.result import StageResult, return_freed_memory, utcnow
from rag_serving.embedders import Embedder
from rag_serving.index.filters import expand_tags
from rag_serving.index.manifest import Generation, read_manifest, write_manifest
from rag_serving.index.schema import chunks_schema
from rag_serving.index.store import IndexStore
from rag_sources.config import FileSourceConfig
from rag_sources.where import sql_in, sql_string

PUBLISH_BATCH = 1024  # chunks per commit (whole documents)
SCAN_BATCH = 2048  # staged chunks per Arrow batch when planning
_PLAN_COLUMNS = [
    "chunk_id", "doc_id", "source", "heading_path", "anchor", "ordinal", "line_start",
    "line_end", "text", "embed_hash", "facets",
]  # fmt: skip
_ROW_FIELDS = (
    "doc_id", "source", "kind", "path", "title", "heading", "anchor", "ordinal",
    "line_start", "line_end", "text", "embed_hash", "tags", "modified", "facets",
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
    if manifest.with_target(generation) == manifest:
        return generation
    with store.writing():  # read again: another writer may have recorded it meanwhile
        manifest = read_manifest(path, missing_ok=True)
        generation = manifest.target_for(embedder.fingerprint)
        updated = manifest.with_target(generation)
        if updated != manifest:
            write_manifest(path, updated)
    return generation


@dataclass(frozen=True)
class DocRange:
    """The documents whose ids lie in ``[start, end)`` (None: unbounded). Doc ids are
    hex digests, spread evenly: ranges split one source's embedding into parts that
    several steps do at once, and every document falls in exactly one part."""

    start: str | None = None
    end: str | None = None

    def where(self) -> str | None:
        bounds = []
        if self.start is not None:
            bounds.append(f"doc_id >= {sql_string(self.start)}")
        if self.end is not None:
            bounds.append(f"doc_id < {sql_string(self.end)}")
        return " AND ".join(bounds) or None

    def describe(self) -> str:
        if self.start is None and self.end is None:
            return "every document"
        return f"doc ids {self.start or '0'}… to {self.end or 'f'}…"


@dataclass
class _Survey:
    """What a first pass found: the source's documents and served chunks (in the
    embedder's generation, within the run's scope) and what to write."""

    generation: Generation
    whole: str  # the source's rows
    scope: str  # the rows this pass handles
    docs: dict[str, dict[str, Any]]
    current_by_doc: dict[str, list[str]]
    stale: list[str]  # served chunk ids no staged chunk has any more
    plan: _Plan


def _survey(
    store: IndexStore,
    source: FileSourceConfig,
    embedder: Embedder,
    full: bool,
    only: set[str] | None,
    doc_range: DocRange,
) -> _Survey:
    generation = target_generation(store, embedder)
    whole = f"source = {sql_string(source.name)}"
    scope = whole if only is None else f"{whole} AND {sql_in('doc_id', sorted(only))}"
    if doc_range.where() is not None:
        scope = f"{scope} AND {doc_range.where()}"
    docs = {
        d["doc_id"]: d
        for d in store.read(
            "documents",
            where=scope,
            columns=["doc_id", "kind", "path", "title", "tags", "modified", "facets"],
        ).to_pylist()
    }
    for doc in docs.values():
        doc["tags"] = expand_tags(list(doc["tags"] or []))
        doc["facets"] = list(doc["facets"] or [])
    current: dict[str, str] = {}  # chunk_id -> row_hash
    current_by_doc: dict[str, list[str]] = {}
    columns = ["chunk_id", "doc_id", "row_hash"]
    for chunk, doc_id, digest in _columns(store, generation.table, scope, columns):
        current[chunk] = digest
        current_by_doc.setdefault(doc_id, []).append(chunk)
    store.staged_chunks()  # opened as a writer: adds columns an older index lacks
    plan = _plan(store, scope, docs, current, full)
    stale = [cid for cid in current if cid not in plan.wanted]
    return _Survey(generation, whole, scope, docs, current_by_doc, stale, plan)


def shard_ranges(
    store: IndexStore,
    source: FileSourceConfig,
    embedder: Embedder,
    full: bool,
    parts: int,
    min_chunks: int,
    only: set[str] | None = None,
) -> list[DocRange]:
    """Split the source's embedding into at most ``parts`` document ranges, each with
    about the same number of chunks to embed and at least ``min_chunks`` of them (a
    source with little to embed stays one part: a step costs a process or a task)."""
    if parts <= 1:
        return [DocRange()]
    survey = _survey(store, source, embedder, full, only, DocRange())
    sizes = sorted((doc_id, len(ids)) for doc_id, ids in survey.plan.to_write.items())
    total = sum(size for _, size in sizes)
    count = min(parts, total // max(1, min_chunks))
    if count <= 1:
        return [DocRange()]
    bounds: list[str | None] = [None]
    done = 0
    for doc_id, size in sizes:
        if done >= total * len(bounds) / count and len(bounds) < count:
            bounds.append(doc_id)
        done += size
    bounds.append(None)
    return [DocRange(start, end) for start, end in pairwise(bounds)]


def embed_source(
    store: IndexStore,
    source: FileSourceConfig,
    embedder: Embedder,
    full: bool,
    batch_size: int = PUBLISH_BATCH,
    only: set[str] | None = None,
    doc_range: DocRange | None = None,
) -> StageResult:
    """Bring the source's served chunks (in the embedder's generation) in line with
    ``staged_chunks`` (for the doc ids ``only``, when given: a watch run's changed
    items; within ``doc_range``, when given: one part of a split embedding).

    Memory stays bounded by ``batch_size``: a first pass streams the staged chunks
    and keeps only ids and row hashes to decide what to write; a second pass reads
    the chunks to write a few whole documents at a time, embeds them and publishes
    them, each batch in one commit.
    """
    survey = _survey(store, source, embedder, full, only, doc_range or DocRange())
    generation, scope, plan = survey.generation, survey.scope, survey.plan
    docs, current_by_doc, stale = survey.docs, survey.current_by_doc, survey.stale
    table = generation.table
    result = StageResult()
    result.extra["generation"] = generation.key
    to_write = sum(len(ids) for ids in plan.to_write.values())
    result.new = plan.new
    result.rebuilt = plan.rebuilt
    result.changed = to_write - plan.new - plan.rebuilt
    result.unchanged = len(plan.wanted) - to_write
    result.deleted = len(stale)
    plan.wanted.clear()  # ids only, but no longer needed

    schema = chunks_schema(embedder.dimension)
    store.chunks(table, embedder.dimension)  # create it even when the source is empty
    # Which texts already have a vector in this generation (hashes only, read once):
    # of the whole table, or of just the texts to write when they are few.
    lookup = None if only is None else sql_in("embed_hash", sorted(plan.hashes))
    known_hashes = {digest for (digest,) in _columns(store, table, lookup, ["embed_hash"])}
    stale_set = set(stale)
    counts = {"embedded": 0, "reused": 0}
    # Vectors of texts several chunks share, kept for the whole stage: read back from
    # the table instead, one text 20,000 messages share came back 20,000 times a batch.
    repeated_vectors: dict[str, np.ndarray] = {}
    done = 0
    for batch_docs in _document_batches(plan.to_write, batch_size):
        wanted_ids = {cid for doc_id in batch_docs for cid in plan.to_write[doc_id]}
        # The chunks these documents lost go in the same commit as their new ones.
        gone = [c for d in batch_docs for c in current_by_doc.get(d, ()) if c in stale_set]
        stale_set.difference_update(gone)
        written: set[str] = set()  # the embed hashes this commit writes
        batches = _served_batches(
            store, table, embedder, scope, batch_docs, wanted_ids, docs, schema,
            _Vectors(known_hashes, plan.repeated, written, counts, repeated_vectors),
            batch_size,
        )  # fmt: skip
        with _computed(batches, schema, store.layout.data_dir / "spill") as ready:
            store.apply_changes(
                table,
                schema,
                ready,
                delete_where=f"{scope} AND {sql_in('chunk_id', gone)}" if gone else None,
                compare_columns=("row_hash",) if not full else (),
            )
        known_hashes.update(written)  # readable from the table now that it is committed
        done += len(wanted_ids)
        report(source.name, "embed", done, to_write)
    embedded, reused = counts["embedded"], counts["reused"]
    if stale_set:  # chunks of deleted documents, and of documents with nothing new
        store.delete(table, f"{scope} AND {sql_in('chunk_id', stale_set)}")
    embedder.prepare_query_path()
    result.row_count = store.count(table, survey.whole)
    result.extra.update(
        {"embedded": embedded, "vectors_reused": reused, "embedding_device": embedder.device}
    )
    return_freed_memory()
    return result


@contextmanager
def _computed(
    batches: Iterable[pa.RecordBatch], schema: pa.Schema, folder: Path
) -> Iterator[pa.Table | Iterator[pa.RecordBatch]]:
    """``batches`` made now (the embedding, without the commit lock) and kept in an
    Arrow file, read back memory-mapped during the commit: a document of 70,000
    chunks is never in memory at once, and the lock is held only to write."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        path = Path(scratch) / "batches.arrow"
        count = 0
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
                count += 1
        if count == 0:
            yield schema.empty_table()
            return
        with pa.memory_map(str(path)) as source:
            reader = pa.ipc.open_file(source)
            yield (reader.get_batch(i) for i in range(reader.num_record_batches))


@dataclass
class _Plan:
    """What the first pass over the staged chunks decided, as ids only."""

    wanted: set[str] = field(default_factory=set)  # every chunk the source should serve
    to_write: dict[str, list[str]] = field(default_factory=dict)  # doc_id -> chunk ids
    new: int = 0  # chunks to write that are not served yet
    rebuilt: int = 0  # chunks rewritten as they are served (a full rebuild)
    # Embed hashes more than one chunk to write has: the only vectors worth keeping
    # until their commit makes them readable from the table.
    repeated: set[str] = field(default_factory=set)
    hashes: set[str] = field(default_factory=set)  # the embed hashes of the chunks to write


def _plan(
    store: IndexStore,
    scope: str,
    docs: dict[str, dict[str, Any]],
    current: dict[str, str],
    full: bool,
) -> _Plan:
    """Stream the source's staged chunks (without their embed text) and decide which
    to write: new ones, and those whose served row would differ (or all, ``full``)."""
    plan = _Plan()
    seen: set[str] = set()
    for staged in _scan(store, "staged_chunks", scope, _PLAN_COLUMNS):
        doc = docs.get(staged["doc_id"])
        if doc is None:  # a document deleted since chunking: its chunks go
            continue
        chunk = staged["chunk_id"]
        plan.wanted.add(chunk)
        served = current.get(chunk)
        differs = served != _row_hash(_served_fields(staged, doc))
        if full or differs:
            plan.to_write.setdefault(staged["doc_id"], []).append(chunk)
            plan.new += served is None
            plan.rebuilt += not differs
            digest = staged["embed_hash"]
            if digest in seen:
                plan.repeated.add(digest)
            seen.add(digest)
    plan.hashes = seen
    return plan


def _scan(store: IndexStore, table: str, where: str, columns: list[str]) -> Iterator[dict]:
    """Rows of ``table`` matching ``where``, read ``SCAN_BATCH`` rows at a time."""
    if not store.table_exists(table):
        return
    query = store.table(table).search().where(where).select(columns)
    for batch in query.to_batches(SCAN_BATCH):
        yield from batch.to_pylist()


def _document_batches(to_write: dict[str, list[str]], batch_size: int) -> Iterator[list[str]]:
    """Documents grouped so that a batch holds about ``batch_size`` chunks (a bigger
    document goes alone: a document is never split across commits)."""
    batch: list[str] = []
    count = 0
    for doc_id, chunk_ids in to_write.items():
        batch.append(doc_id)
        count += len(chunk_ids)
        if count >= batch_size:
            yield batch
            batch, count = [], 0
    if batch:
        yield batch


def _stored_vectors(store: IndexStore, table: str, hashes: list[str]) -> dict[str, np.ndarray]:
    """One stored vector per embed hash of ``hashes`` (many rows may share one: read
    as Arrow, never as a Python list per row)."""
    data = store.read(table, where=sql_in("embed_hash", hashes), columns=["embed_hash", "vector"])
    first: dict[str, int] = {}
    for index, digest in enumerate(data.column("embed_hash").to_pylist()):
        first.setdefault(digest, index)
    if not first:
        return {}
    picked = data.column("vector").take(list(first.values())).combine_chunks()
    vectors = picked.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    matrix = vectors.reshape(len(first), -1)
    return {digest: matrix[row] for row, digest in enumerate(first)}


def _columns(
    store: IndexStore, table: str, where: str | None, columns: list[str]
) -> Iterator[tuple[Any, ...]]:
    """``columns`` of the matching rows as tuples (no dict per row)."""
    if not store.table_exists(table):
        return iter(())
    data = store.read(table, where=where, columns=columns)
    return zip(*(data.column(c).to_pylist() for c in columns), strict=True)


def _served_fields(staged: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    """The served row's columns that ``row_hash`` covers (``doc`` tags already expanded)."""
    return {
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
        "tags": doc["tags"],
        "modified": doc["modified"],
        # The document's facets, then the chunk's own (a code chunk's symbol).
        "facets": list(dict.fromkeys([*doc["facets"], *(staged.get("facets") or ())])),
    }


def _served_row(staged: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    row = _served_fields(staged, doc)
    row["embed_text"] = staged["embed_text"]
    row["row_hash"] = _row_hash(row)
    return row


def _row_hash(row: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for name in _ROW_FIELDS:
        h.update(repr(row[name]).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:32]


@dataclass
class _Vectors:
    """What ``_vectors_for`` knows across the batches of one commit."""

    committed: set[str]  # embed hashes with a vector in the table
    repeated: set[str]  # embed hashes that more chunks to write have (``_Plan``)
    written: set[str]  # embed hashes this commit writes
    counts: dict[str, int]  # "embedded", "reused"
    # Vectors a later batch may need (repeated texts only: ``_Plan.repeated``).
    pending: dict[str, np.ndarray] = field(default_factory=dict)


def _served_batches(
    store: IndexStore,
    table: str,
    embedder: Embedder,
    scope: str,
    batch_docs: list[str],
    wanted_ids: set[str],
    docs: dict[str, dict[str, Any]],
    schema: pa.Schema,
    state: _Vectors,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """The served rows of ``batch_docs``' chunks in ``wanted_ids``, with vectors,
    ``batch_size`` rows at a time: one document of 70,000 chunks is never in memory
    as rows and vectors at once (LanceDB reads the batches into one commit)."""
    now = utcnow()
    where = f"{scope} AND {sql_in('doc_id', batch_docs)}"
    rows: list[dict[str, Any]] = []
    for staged in _scan(store, "staged_chunks", where, [*_PLAN_COLUMNS, "embed_text"]):
        if staged["chunk_id"] in wanted_ids:
            rows.append(_served_row(staged, docs[staged["doc_id"]]))
        if len(rows) >= batch_size:
            yield _record_batch(store, table, embedder, rows, state, schema, now)
            rows = []
    if rows:
        yield _record_batch(store, table, embedder, rows, state, schema, now)


def _record_batch(
    store: IndexStore,
    table: str,
    embedder: Embedder,
    rows: list[dict[str, Any]],
    state: _Vectors,
    schema: pa.Schema,
    now: Any,
) -> pa.RecordBatch:
    vectors, fresh = _vectors_for(store, table, embedder, rows, state)
    state.counts["embedded"] += fresh
    state.counts["reused"] += len(rows) - fresh
    for row, vector in zip(rows, vectors, strict=True):
        row["vector"] = vector
        row["indexed_at"] = now
    return pa.RecordBatch.from_pylist(rows, schema)


def _vectors_for(
    store: IndexStore,
    table: str,
    embedder: Embedder,
    rows: list[dict[str, Any]],
    state: _Vectors,
) -> tuple[list[np.ndarray], int]:
    """Vectors for ``rows``: reused by embed_hash where the index (or an earlier
    batch of this commit) has one, else embedded. Returns the vectors and how many
    were freshly embedded."""
    wanted = {r["embed_hash"] for r in rows}
    known = {h: state.pending[h] for h in wanted if h in state.pending}
    hashes = list((wanted & state.committed) - known.keys())
    if hashes:
        known.update(_stored_vectors(store, table, hashes))
        for digest in state.repeated.intersection(hashes).intersection(known):
            state.pending[digest] = known[digest]
    missing: dict[str, str] = {}
    for r in rows:
        if r["embed_hash"] not in known:
            missing.setdefault(r["embed_hash"], r["embed_text"])
    if missing:
        vectors = embedder.embed_documents(list(missing.values()))
        for digest, vector in zip(missing.keys(), vectors, strict=True):
            known[digest] = vector
            if digest in state.repeated:
                state.pending[digest] = vector
    state.written.update(wanted)
    return [known[r["embed_hash"]] for r in rows], len(missing)
