"""Stage 5 (``fulltext_index``): keep the generation's Tantivy index equal to its
LanceDB chunks, record the source as indexed, and switch to a newly built
generation once it holds every configured source."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa

from rag_assets.progress import report
from rag_assets.stages.embed import target_generation
from rag_assets.stages.result import StageResult, return_freed_memory, utcnow
from rag_serving.embedders import Embedder
from rag_serving.index import schema as schemas
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.manifest import IndexManifest, read_manifest, update_manifest
from rag_serving.index.store import IndexStore
from rag_sources.config import FileSourceConfig
from rag_sources.where import sql_in, sql_string

FULLTEXT_COLUMNS = [
    "chunk_id", "doc_id", "source", "kind", "path", "title", "heading", "tags", "text",
    "modified", "row_hash", "facets",
]  # fmt: skip
ROW_BATCH = 1024  # LanceDB rows per Arrow batch when adding to Tantivy
LOOKUP_LIMIT = 2000  # up to this many rows to add are looked up by id


def fulltext_rows(store: IndexStore, table: str, where: str | None) -> list[dict]:
    """The rows the Tantivy index should hold (LanceDB chunks plus document aliases)."""
    if not store.table_exists(table):
        return []
    rows = store.read(table, where=where, columns=FULLTEXT_COLUMNS).to_pylist()
    aliases = {
        d["doc_id"]: d["aliases"]
        for d in store.read("documents", where=where, columns=["doc_id", "aliases"]).to_pylist()
    }
    for row in rows:
        row["aliases"] = aliases.get(row["doc_id"]) or []
    return rows


def sync_fulltext(
    store: IndexStore,
    source: FileSourceConfig,
    embedder: Embedder,
    run_id: str,
    configured: Sequence[str],
    only: set[str] | None = None,
) -> StageResult:
    """Make the Tantivy index hold exactly the source's chunks from LanceDB (those
    of the doc ids ``only``, when given: a watch run's changed items).

    Rows are compared by ``row_hash`` (ids and hashes only); the rows to add are
    streamed from LanceDB into one Tantivy commit, whose writer flushes to disk
    within its own heap budget, so memory does not grow with the source.
    """
    with store.writing():  # one Tantivy writer at a time; the manifest may change
        return _sync_fulltext(store, source, embedder, run_id, configured, only)


def _sync_fulltext(
    store: IndexStore,
    source: FileSourceConfig,
    embedder: Embedder,
    run_id: str,
    configured: Sequence[str],
    only: set[str] | None,
) -> StageResult:
    generation = target_generation(store, embedder)
    whole = f"source = {sql_string(source.name)}"
    scope = whole if only is None else f"{whole} AND {sql_in('doc_id', sorted(only))}"
    lance = _row_hashes(store, generation.table, scope)
    index = FulltextIndex(store.layout.fulltext_dir(generation.key))
    index.finish_documents()  # any source's run stopped between its two commits
    states = index.chunk_states(source.name, source.language, only)
    before = states.hashes
    stale = [cid for cid, digest in before.items() if lance.get(cid) != digest]
    add = {cid for cid, digest in lance.items() if before.get(cid) != digest}
    # Whole-document rows out of step with their chunks, whatever the cause, are remade
    # too, as the chunks themselves are compared on every run.
    out_of_step = index.documents_out_of_step(source.name, only, states)
    if stale or add:
        rows = _rows_to_add(store, generation.table, scope, add) if add else ()
        index.replace(stale, rows, source.language, documents=out_of_step)
    elif out_of_step:
        index.refresh_documents(out_of_step)
    repaired = len(out_of_step)
    report(source.name, "fulltext", len(lance), len(lance))
    total = len(lance) if only is None else store.count(generation.table, whole)
    record_source_state(store, source.name, run_id, generation.key, total)
    deleted = sum(1 for cid in stale if cid not in lance)
    result = StageResult(deleted=deleted, row_count=total)
    result.new = sum(1 for cid in add if cid not in before)
    result.changed = len(add) - result.new
    result.unchanged = len(lance) - len(add)
    result.extra["generation"] = generation.key
    if repaired:
        result.extra["documents_repaired"] = repaired
    if promote_if_complete(store, configured):
        result.extra["promoted_generation"] = generation.key
    return_freed_memory()
    return result


def lance_row_hashes(store: IndexStore, table: str, where: str) -> dict[str, str]:
    """``chunk_id → row_hash`` of the LanceDB rows matching ``where``."""
    return _row_hashes(store, table, where)


def _row_hashes(store: IndexStore, table: str, where: str) -> dict[str, str]:
    if not store.table_exists(table):
        return {}
    rows = store.read(table, where=where, columns=["chunk_id", "row_hash"])
    ids, hashes = rows.column("chunk_id").to_pylist(), rows.column("row_hash").to_pylist()
    return dict(zip(ids, hashes, strict=True))


def _rows_to_add(store: IndexStore, table: str, scope: str, wanted: set[str]) -> Iterator[dict]:
    """The LanceDB rows of ``wanted`` (with document aliases), a batch at a time:
    looked up by id when they are few, else by one streamed scan of the source."""
    aliases = {
        d["doc_id"]: d["aliases"]
        for d in store.read("documents", where=scope, columns=["doc_id", "aliases"]).to_pylist()
    }
    if len(wanted) <= LOOKUP_LIMIT:
        query = store.table(table).search().where(f"{scope} AND {sql_in('chunk_id', wanted)}")
    else:
        query = store.table(table).search().where(scope)
    for batch in query.select(FULLTEXT_COLUMNS).to_batches(ROW_BATCH):
        for row in batch.to_pylist():
            if row["chunk_id"] in wanted:
                row["aliases"] = aliases.get(row["doc_id"]) or []
                yield row


def promote_if_complete(store: IndexStore, configured: Sequence[str]) -> bool:
    """Make the building generation active once every configured source is in it."""
    path = store.layout.manifest_path
    building = read_manifest(path, missing_ok=True).building
    if building is None:
        return False
    states = {r["source"]: r["generation"] for r in store.read("source_state").to_pylist()}
    if any(states.get(name) != building.key for name in configured):
        return False

    def promote(manifest: IndexManifest) -> IndexManifest:
        # Another writer may have switched in between: promote only what was checked.
        return manifest.promoted() if manifest.building == building else manifest

    return update_manifest(path, promote).active == building


def record_source_state(
    store: IndexStore, source: str, run_id: str, generation: str, chunk_count: int
) -> None:
    """Remember that ``source`` was fully indexed by ``run_id`` (for `ragline status`)."""
    scope = f"source = {sql_string(source)}"
    severities = store.read("file_issues", where=scope, columns=["severity"]).column("severity")
    values = severities.to_pylist()
    row = {
        "source": source,
        "last_run_id": run_id,
        "generation": generation,
        "last_indexed_at": utcnow(),
        "files": store.count("files", scope),
        "documents": store.count("documents", scope),
        "chunks": chunk_count,
        "errors": values.count("error"),
        "skipped": values.count("skipped"),
    }
    store.apply_changes(
        "source_state", schemas.SOURCE_STATE, pa.Table.from_pylist([row], schemas.SOURCE_STATE)
    )
