"""Arrow schemas of the LanceDB tables.

- ``files``: what the last scan saw of each item of a source (a file, or later a
  message, a feed entry, a git blob): its key (``path``), change fingerprint and
  content hash.
- ``documents``: one row per successfully parsed item.
- ``file_issues``: items that were skipped, failed, have warnings or pending work.
- ``staged_chunks``: the chunks each document should have (no vectors yet).
- ``chunks_<key>``: what search serves, one table per embedder generation: chunk
  text, metadata and vectors.
- ``source_state``: per source, the last completed indexing run and its totals.
- ``run_failures``: per source, the last run that failed and its one-line cause
  (shown while it is newer than the last completed run). Added after format 3
  without a format change: a table that does not exist reads as empty.

Columns added without a format change (``LATE_COLUMNS``) are nullable; a writer
opening an older table adds them, and readers treat a missing one as null.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 3
UPGRADABLE_VERSIONS = (2,)  # formats rag_assets/migrations.py upgrades in place
# Values old rows get for columns added since (SQL over the old columns); a column
# not named here starts as null. Format 3 added files.fingerprint, documents.file_type,
# facets, sections_json, parser, parsed_title, deferred, file_issues.parser and the
# chunks' facets.
COLUMN_DEFAULTS = {
    ("files", "fingerprint"): "concat(cast(size as string), ':', cast(mtime_ns as string))",
}
TIMESTAMP = pa.timestamp("us", tz="UTC")
# (table, column) added after format 3, each nullable: staged_chunks.facets (a chunk's
# own facets: the symbol of a code chunk).
LATE_COLUMNS = (("staged_chunks", "facets"),)


def _key(name: str) -> pa.Field:
    return pa.field(name, pa.string(), nullable=False)


FILES = pa.schema(
    [
        _key("doc_id"),
        pa.field("source", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),  # the item's key in its source
        pa.field("size", pa.int64()),
        pa.field("mtime_ns", pa.int64()),
        pa.field("content_hash", pa.string()),
        pa.field("error", pa.string()),  # why the item could not be read, if it could not
        pa.field("seen_at", TIMESTAMP),
        # The kind's cheap change signal (size and mtime for a file, a blob id, an
        # ETag): equal means unchanged, so the content is not read again.
        pa.field("fingerprint", pa.string()),
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
        pa.field("file_type", pa.string()),  # pdf, docx, md, ... (what parsed it)
        # Filterable "name:value" pairs ("type:pdf"; later "author:…", "language:go"),
        # copied to every chunk: new filters need no schema change.
        pa.field("facets", pa.list_(pa.string())),
        # Anchored parts of the body (pages, slides, sheets, chapters) as JSON.
        pa.field("sections_json", pa.string()),
        pa.field("parser", pa.string()),  # parser version; with content_hash the cache key
        pa.field("parsed_title", pa.string()),  # the title the content gave, if any
        pa.field("deferred", pa.list_(pa.string())),  # costly work left for a later pass
    ]
)

FILE_ISSUES = pa.schema(
    [
        _key("doc_id"),
        pa.field("source", pa.string(), nullable=False),
        pa.field("path", pa.string()),
        pa.field("content_hash", pa.string()),
        pa.field("severity", pa.string()),  # error | skipped | warning | pending
        pa.field("message", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("recorded_at", TIMESTAMP),
        pa.field("parser", pa.string()),  # a new parser version retries the item
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
        # The chunk's own "name:value" facets ("symbol:Client.retry"), served with
        # its document's.
        pa.field("facets", pa.list_(pa.string())),
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

# Tags the [llm] model gave a source's new documents (``auto_tags``): merged into the
# document's own tags each time it is parsed, so an edit keeps them, and the model is
# asked once per document.
MODEL_TAGS = pa.schema(
    [
        _key("doc_id"),
        pa.field("source", pa.string(), nullable=False),
        pa.field("path", pa.string()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("model", pa.string()),
        pa.field("tagged_at", TIMESTAMP),
    ]
)

RUN_FAILURES = pa.schema(
    [
        _key("source"),
        pa.field("run_id", pa.string()),
        pa.field("step", pa.string()),  # the asset (stage) that failed, if known
        pa.field("message", pa.string()),  # one line: what went wrong
        pa.field("failed_at", TIMESTAMP),
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
            # where in the document: "page=6", "slide=3", or a note's "Heading#Sub"
            pa.field("anchor", pa.string()),
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
            pa.field("facets", pa.list_(pa.string())),
        ]
    )


TABLE_KEYS = {
    "files": "doc_id",
    "documents": "doc_id",
    "file_issues": "doc_id",
    "staged_chunks": "chunk_id",
    "source_state": "source",
    "run_failures": "source",
    "model_tags": "doc_id",
}


def table_key(name: str) -> str:
    """The key column of table ``name`` (generation tables ``chunks_<key>`` included)."""
    return "chunk_id" if name.startswith("chunks_") else TABLE_KEYS[name]
