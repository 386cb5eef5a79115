"""Upgrading an index written by an older ragline, in place and without re-embedding.

Columns a newer format added are appended to the existing LanceDB tables (null, or
a value computed from the old columns, ``schema.COLUMN_DEFAULTS``); the Tantivy
indexes, whose schema cannot change in place, are rebuilt from LanceDB (the source
of truth, ~1 s per 20k chunks). The stages then fill the new columns: a document
whose parser version is unknown is parsed again (its chunks and vectors stay, as
its content hash is unchanged), and the served rows are rewritten with their old
vectors.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping

import pyarrow as pa

from rag_assets.stages.fulltext import fulltext_rows
from rag_serving.index import schema as schemas
from rag_serving.index.fulltext import FulltextIndex, is_outdated
from rag_serving.index.manifest import Generation, read_manifest, write_manifest
from rag_serving.index.store import IndexStore, schema_for

log = logging.getLogger(__name__)


def target_schema(name: str, current: pa.Schema) -> pa.Schema | None:
    """The schema table ``name`` should have in this format (None for unknown tables)."""
    if name.startswith("chunks_"):
        vector = current.field("vector").type
        return schemas.chunks_schema(vector.list_size)
    return schema_for(name)


def add_missing_columns(store: IndexStore) -> list[str]:
    """Append the columns this format has and the tables lack; returns 'table.column's."""
    added: list[str] = []
    for name in store.table_names():
        table = store.table(name)
        target = target_schema(name, table.schema)
        if target is None:
            continue
        missing = [f for f in target if f.name not in table.schema.names]
        for field in missing:
            default = schemas.COLUMN_DEFAULTS.get((name, field.name))
            table.add_columns({field.name: default} if default else [field])
            added.append(f"{name}.{field.name}")
    return added


def upgrade_index(store: IndexStore, languages: Mapping[str, str] | None = None) -> str:
    """Bring the index to the current format; '' when it already is. ``languages``:
    each source's keyword ``language`` setting, for rebuilt full-text indexes."""
    path = store.layout.manifest_path
    manifest = read_manifest(path, missing_ok=True, upgrading=True)
    live = [g for g in (manifest.active, manifest.building) if g is not None]
    if manifest.schema_version == schemas.SCHEMA_VERSION:
        return upgrade_fulltext(store, live, languages)
    from_version = manifest.schema_version
    added = add_missing_columns(store)
    rebuilt = []
    for generation in live:
        folder = store.layout.fulltext_dir(generation.key)
        rows = fulltext_rows(store, generation.table, None)
        FulltextIndex.rebuild(folder, rows, languages)
        rebuilt.append(generation.key)
    # Any other Tantivy folder (a generation awaiting removal, a crashed rebuild) has
    # the old schema and cannot be opened any more; it is derived data: remove it.
    root = store.layout.fulltext_root
    if root.is_dir():
        for folder in root.iterdir():
            if folder.is_dir() and folder.name not in {g.key for g in live}:
                shutil.rmtree(folder, ignore_errors=True)
    from dataclasses import replace

    write_manifest(path, replace(manifest, schema_version=schemas.SCHEMA_VERSION))
    summary = (
        f"format {from_version} → {schemas.SCHEMA_VERSION}: added {len(added)} columns, "
        f"rebuilt the full-text index of {len(rebuilt)} generation(s); nothing re-embedded"
    )
    log.info(summary)
    return summary


def upgrade_fulltext(
    store: IndexStore, live: list[Generation], languages: Mapping[str, str] | None = None
) -> str:
    """Rebuild, from LanceDB, the live generations' Tantivy indexes that an older
    ragline wrote with other analyzers; '' when none was."""
    rebuilt = []
    for generation in live:
        folder = store.layout.fulltext_dir(generation.key)
        if is_outdated(folder):
            rows = fulltext_rows(store, generation.table, None)
            FulltextIndex.rebuild(folder, rows, languages)
            rebuilt.append(generation.key)
    if not rebuilt:
        return ""
    summary = (
        f"rebuilt the full-text index of {len(rebuilt)} generation(s) with this version's "
        "analyzers (every script searchable); nothing re-embedded"
    )
    log.info(summary)
    return summary
