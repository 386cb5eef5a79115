"""Arrow schemas of the LanceDB tables.

- ``files``: what the last scan saw of each source file (stat and content hash).
- ``documents``: one row per successfully parsed document.
- ``file_issues``: files that were skipped or failed, with the reason.
- ``staged_chunks``: the chunks each document should have (no vectors yet).
- ``chunks_<key>``: what search serves, one table per embedder generation: chunk
  text, metadata and vectors.
- ``source_state``: per source, the last completed indexing run and its totals.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2
TIMESTAMP = pa.timestamp("us", tz="UTC")


def _key(name: str) -> pa.Field:
    return pa.field(name, pa.string(), nullable=False)


FILES = pa.schema(
    [
        _key("doc_id"),
        pa.field("source", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("size", pa.int64()),
        pa.field("mtime_ns", pa.int64()),
        pa.field("content_hash", pa.string()),
        pa.field("error", pa.string()),  # why the file could not be read, if it could not
        pa.field("seen_at", TIMESTAMP),
    ]
)

DOCUMENTS = pa.schema(
    [
        _key("doc_id"),
        pa.field("source", pa.string(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("path", pa.string()),
        pa.field("title", pa.string()),
        pa.field("aliases", pa.list_(pa.string())),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("links_json", pa.string()),
        pa.field("frontmatter_json", pa.string()),
        pa.field("created", TIMESTAMP),
        pa.field("updated", TIMESTAMP),
        pa.field("modified", TIMESTAMP),
        pa.field("content_hash", pa.string()),
        pa.field("body", pa.string()),
        pa.field("body_start_line", pa.int32()),
        pa.field("warnings", pa.list_(pa.string())),
        pa.field("indexed_at", TIMESTAMP),
    ]
)

FILE_ISSUES = pa.schema(
    [
        _key("doc_id"),
        pa.field("source", pa.string(), nullable=False),
        pa.field("path", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("severity", pa.string()),  # error | skipped | warning
        pa.field("message", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("recorded_at", TIMESTAMP),
    ]
)

STAGED_CHUNKS = pa.schema(
    [
        _key("chunk_id"),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32()),
        pa.field("heading_path", pa.list_(pa.string())),
        pa.field("anchor", pa.string()),
        pa.field("line_start", pa.int32()),
        pa.field("line_end", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("embed_text", pa.string()),
        pa.field("embed_hash", pa.string()),
        pa.field("token_count", pa.int32()),
        pa.field("doc_content_hash", pa.string()),
        # What produced these chunks (chunker version, tokenizer, sizes): a different
        # value means the document must be chunked again.
        pa.field("chunking_key", pa.string()),
    ]
)

SOURCE_STATE = pa.schema(
    [
        _key("source"),
        pa.field("last_run_id", pa.string()),
        pa.field("generation", pa.string()),
        pa.field("last_indexed_at", TIMESTAMP),
        pa.field("files", pa.int64()),
        pa.field("documents", pa.int64()),
        pa.field("chunks", pa.int64()),
        pa.field("errors", pa.int64()),
        pa.field("skipped", pa.int64()),
    ]
)


def chunks_schema(dimension: int) -> pa.Schema:
    """Schema of the served ``chunks`` table for vectors of ``dimension``."""
    return pa.schema(
        [
            _key("chunk_id"),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string(), nullable=False),
            pa.field("kind", pa.string()),
            pa.field("path", pa.string()),
            pa.field("title", pa.string()),
            pa.field("heading", pa.string()),  # heading path joined with " > "
            pa.field("anchor", pa.string()),  # Obsidian-style "Heading#Sub"
            pa.field("ordinal", pa.int32()),
            pa.field("line_start", pa.int32()),
            pa.field("line_end", pa.int32()),
            pa.field("text", pa.string()),
            pa.field("embed_hash", pa.string()),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("modified", TIMESTAMP),
            pa.field("indexed_at", TIMESTAMP),
            # Hash of every column but indexed_at: rows whose row_hash is unchanged are
            # not rewritten, and the Tantivy index is synced by it.
            pa.field("row_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


TABLE_KEYS = {
    "files": "doc_id",
    "documents": "doc_id",
    "file_issues": "doc_id",
    "staged_chunks": "chunk_id",
    "source_state": "source",
}


def table_key(name: str) -> str:
    """The key column of table ``name`` (generation tables ``chunks_<key>`` included)."""
    return "chunk_id" if name.startswith("chunks_") else TABLE_KEYS[name]
