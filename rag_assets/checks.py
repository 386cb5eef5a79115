"""Integrity checks of the index, run inside the assets that write it (blocking:
a failure fails the run, so a broken index is never reported as fresh)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from dagster import MetadataValue

from rag_serving.embedders.base import EmbedderFingerprint
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.manifest import Generation, read_manifest
from rag_serving.index.store import IndexStore, sql_string

TANTIVY_MATCHES_LANCEDB = "tantivy_matches_lancedb"
CHUNKS_HAVE_DOCUMENTS = "chunks_have_documents"
VECTORS_HAVE_RECORDED_DIMENSION = "vectors_have_recorded_dimension"
ONE_EMBEDDER_FINGERPRINT = "one_embedder_fingerprint"
ITEMS_INDEXED = "items_indexed"
MAX_LISTED_ITEMS = 20


@dataclass(frozen=True)
class CheckOutcome:
    name: str
    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)


def tantivy_matches_lancedb(store: IndexStore, generation: Generation, source: str) -> CheckOutcome:
    """Tantivy holds exactly the source's LanceDB chunk ids, with the same row hashes."""
    scope = f"source = {sql_string(source)}"
    lance = {}
    if store.table_exists(generation.table):
        rows = store.read(generation.table, where=scope, columns=["chunk_id", "row_hash"])
        lance = dict(
            zip(
                rows.column("chunk_id").to_pylist(),
                rows.column("row_hash").to_pylist(),
                strict=True,
            )
        )
    tantivy = FulltextIndex(store.layout.fulltext_dir(generation.key)).row_hashes(source)
    missing = [c for c in lance if c not in tantivy]
    extra = [c for c in tantivy if c not in lance]
    differ = [c for c in lance if c in tantivy and tantivy[c] != lance[c]]
    passed = not (missing or extra or differ)
    return CheckOutcome(
        TANTIVY_MATCHES_LANCEDB,
        passed,
        "Tantivy and LanceDB hold the same chunks" if passed else "Tantivy and LanceDB differ",
        {
            "lancedb_chunks": len(lance),
            "missing_in_tantivy": len(missing),
            "extra_in_tantivy": len(extra),
            "different_rows": len(differ),
        },
    )


def chunks_have_documents(store: IndexStore, generation: Generation, source: str) -> CheckOutcome:
    """Every served chunk belongs to a document that exists."""
    scope = f"source = {sql_string(source)}"
    if not store.table_exists(generation.table):
        return CheckOutcome(CHUNKS_HAVE_DOCUMENTS, True, "no chunks yet", {"orphans": 0})
    chunk_docs = set(
        store.read(generation.table, where=scope, columns=["doc_id"]).column("doc_id").to_pylist()
    )
    docs = set(
        store.read("documents", where=scope, columns=["doc_id"]).column("doc_id").to_pylist()
    )
    orphans = chunk_docs - docs
    return CheckOutcome(
        CHUNKS_HAVE_DOCUMENTS,
        not orphans,
        "every chunk has its document" if not orphans else f"{len(orphans)} documents missing",
        {"orphan_documents": len(orphans)},
    )


def vectors_have_recorded_dimension(
    store: IndexStore, generation: Generation, source: str
) -> CheckOutcome:
    """The table's vectors have the dimension recorded for the generation, none null."""
    expected = generation.fingerprint.dimension
    if not store.table_exists(generation.table):
        return CheckOutcome(
            VECTORS_HAVE_RECORDED_DIMENSION, True, "no chunks yet", {"dimension": expected}
        )
    table = store.table(generation.table)
    vector_type = table.schema.field("vector").type
    actual = vector_type.list_size if pa.types.is_fixed_size_list(vector_type) else -1
    nulls = table.count_rows(f"source = {sql_string(source)} AND vector IS NULL")
    passed = actual == expected and nulls == 0
    return CheckOutcome(
        VECTORS_HAVE_RECORDED_DIMENSION,
        passed,
        f"vectors have {actual} dimensions (recorded {expected}); {nulls} missing",
        {"dimension": actual, "recorded_dimension": expected, "missing_vectors": nulls},
    )


def one_embedder_fingerprint(store: IndexStore, fingerprint: EmbedderFingerprint) -> CheckOutcome:
    """The index records one active fingerprint (plus at most one being built), and the
    vectors just written belong to one of them."""
    manifest = read_manifest(store.layout.manifest_path, missing_ok=True)
    known = [g.fingerprint for g in (manifest.active, manifest.building) if g is not None]
    passed = manifest.active is not None and fingerprint in known
    return CheckOutcome(
        ONE_EMBEDDER_FINGERPRINT,
        passed,
        f"active: {manifest.active.fingerprint.describe() if manifest.active else 'none'}",
        {
            "active": manifest.active.key if manifest.active else "none",
            "building": manifest.building.key if manifest.building else "none",
        },
    )


def items_indexed(store: IndexStore, source: str) -> CheckOutcome:
    """Every item of the source was indexed: fails (as a warning, never blocking) while
    some item is broken, skipped or waiting for deferred work, and lists them."""
    scope = f"source = {sql_string(source)}"
    rows = store.read("file_issues", where=scope, columns=["path", "severity", "message"])
    problems = [r for r in rows.to_pylist() if r["severity"] != "warning"]
    counts = {s: sum(1 for r in problems if r["severity"] == s) for s in ("error", "skipped")}
    counts["pending"] = sum(1 for r in problems if r["severity"] == "pending")
    listed = sorted(problems, key=lambda r: (r["severity"], r["path"]))[:MAX_LISTED_ITEMS]
    table = "\n".join(
        ["| item | severity | reason |", "|---|---|---|"]
        + [
            f"| `{r['path']}` | {r['severity']} | {r['message'].replace('|', '/')} |"
            for r in listed
        ]
    )
    metadata: dict[str, Any] = dict(counts)
    if problems:
        metadata["items"] = MetadataValue.md(table)
    return CheckOutcome(
        ITEMS_INDEXED,
        not problems,
        "every item is indexed"
        if not problems
        else f"{counts['error']} failed, {counts['skipped']} skipped, "
        f"{counts['pending']} waiting for OCR or other deferred work",
        metadata,
    )
