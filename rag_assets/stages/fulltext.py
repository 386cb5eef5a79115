"""Stage 5 (``fulltext_index``): keep the Tantivy index equal to the LanceDB chunks."""

from __future__ import annotations

import pyarrow as pa

from rag_assets.progress import report
from rag_assets.stages.result import StageResult, utcnow
from rag_serving.config import MarkdownSourceConfig
from rag_serving.index import schema as schemas
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.store import IndexStore, sql_string

FULLTEXT_COLUMNS = [
    "chunk_id", "doc_id", "source", "kind", "path", "title", "heading", "tags", "text",
    "modified", "row_hash",
]  # fmt: skip


def sync_fulltext(store: IndexStore, source: MarkdownSourceConfig, run_id: str) -> StageResult:
    """Make the Tantivy index hold exactly the source's chunks from LanceDB."""
    scope = f"source = {sql_string(source.name)}"
    rows = (
        store.read("chunks", where=scope, columns=FULLTEXT_COLUMNS).to_pylist()
        if store.table_exists("chunks")
        else []
    )
    aliases = {
        d["doc_id"]: d["aliases"]
        for d in store.read("documents", where=scope, columns=["doc_id", "aliases"]).to_pylist()
    }
    for row in rows:
        row["aliases"] = aliases.get(row["doc_id"]) or []
    index = FulltextIndex(store.layout.fulltext_dir)
    before = index.row_hashes(source.name)
    written, deleted = index.sync_source(source.name, rows)
    report(source.name, "fulltext", len(rows), len(rows))
    record_source_state(store, source.name, run_id, len(rows))
    result = StageResult(deleted=deleted, row_count=len(rows))
    result.new = sum(1 for r in rows if r["chunk_id"] not in before)
    result.changed = written - result.new
    result.unchanged = len(rows) - written
    return result


def record_source_state(store: IndexStore, source: str, run_id: str, chunk_count: int) -> None:
    """Remember that ``source`` was fully indexed by ``run_id`` (for `ragline status`)."""
    scope = f"source = {sql_string(source)}"
    issues = store.read("file_issues", where=scope, columns=["severity"]).column("severity")
    severities = issues.to_pylist()
    row = {
        "source": source,
        "last_run_id": run_id,
        "last_indexed_at": utcnow(),
        "files": store.count("files", scope),
        "documents": store.count("documents", scope),
        "chunks": chunk_count,
        "errors": severities.count("error"),
        "skipped": severities.count("skipped"),
    }
    store.apply_changes(
        "source_state", schemas.SOURCE_STATE, pa.Table.from_pylist([row], schemas.SOURCE_STATE)
    )
