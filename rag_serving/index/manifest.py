"""``index.json``: which generation of vectors search uses, and which is being built.

A *generation* is the served chunks table (``chunks_<key>``) and its Tantivy index
(``fulltext/<key>``) made with one embedder fingerprint. Changing the embedder
builds a new generation beside the active one; search keeps using the active one
until the new one holds every source, then the manifest switches atomically.

On a local disk it is a file replaced by a rename. On object storage, where there
is no atomic rename, it is the one row of the LanceDB table ``index_manifest``
beside the chunks: a write is a conditional update of that row (``revision`` must
still be the one read), committed through Lance's own protocol (conditional PUT
on S3, DynamoDB with ``s3+ddb://``), so of two writers racing, exactly one wins
and the other gets ManifestConflictError (``update_manifest`` retries it).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rag_serving.index.cpu import check_lancedb_cpu
from rag_serving.index.fingerprint import EmbedderFingerprint
from rag_serving.index.layout import RemoteManifest
from rag_serving.index.schema import SCHEMA_VERSION, UPGRADABLE_VERSIONS
from rag_sources.errors import (
    EmbedderMismatchError,
    IndexNeedsUpgradeError,
    IndexNotBuiltError,
    ManifestConflictError,
)

MANIFEST_TABLE = "index_manifest"
_MANIFEST_ROW = "index"
_CONFLICT_RETRIES = 5


@dataclass(frozen=True)
class Generation:
    """Vectors (and their full-text index) made with one embedder fingerprint."""

    fingerprint: EmbedderFingerprint
    started_at: str = ""

    @property
    def key(self) -> str:
        return self.fingerprint.key()

    @property
    def table(self) -> str:
        return f"chunks_{self.key}"

    def as_json(self) -> dict[str, Any]:
        return {
            "embedder": self.fingerprint.as_dict(),
            "key": self.key,
            "started_at": self.started_at,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Generation:
        return cls(EmbedderFingerprint(**raw["embedder"]), str(raw.get("started_at", "")))


@dataclass(frozen=True)
class IndexManifest:
    schema_version: int
    active: Generation | None
    building: Generation | None = None
    updated_at: str = ""
    # On object storage: the revision this manifest was read at (0: none stored yet);
    # a write succeeds only while the stored one is still this.
    revision: int | None = field(default=None, compare=False)

    def target_for(self, fingerprint: EmbedderFingerprint) -> Generation:
        """The generation that vectors of ``fingerprint`` belong in."""
        if self.active and self.active.fingerprint == fingerprint:
            return self.active
        if self.building and self.building.fingerprint == fingerprint:
            return self.building
        return Generation(fingerprint, _now())

    def with_target(self, generation: Generation) -> IndexManifest:
        """This manifest once ``generation`` starts receiving vectors."""
        if self.active is None:
            return replace(self, active=generation, updated_at=_now())
        if generation == self.active or generation == self.building:
            return self
        return replace(self, building=generation, updated_at=_now())

    def promoted(self) -> IndexManifest:
        """The building generation made active."""
        return IndexManifest(self.schema_version, self.building, None, _now(), self.revision)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def empty_manifest(revision: int | None = None) -> IndexManifest:
    return IndexManifest(SCHEMA_VERSION, None, None, _now(), revision)


ManifestPath = Path | RemoteManifest


def read_manifest(
    path: ManifestPath, missing_ok: bool = False, upgrading: bool = False
) -> IndexManifest:
    """Read ``index.json``; IndexNotBuiltError if there is none yet (unless ``missing_ok``).

    An older format that can be upgraded in place is an error telling to run
    ``ragline index`` (which upgrades it), unless ``upgrading``.
    """
    revision = None
    if isinstance(path, RemoteManifest):
        stored = _read_remote(path)
        raw = None if stored is None else stored[1]
        revision = 0 if stored is None else stored[0]
    elif path.is_file():
        raw = json.loads(path.read_text(encoding="utf-8"))
    else:
        raw = None
    if raw is None:
        if missing_ok:
            return empty_manifest(revision)
        raise IndexNotBuiltError(f"no index at {path.parent} yet; build it with `ragline index`")
    return _parse(path, raw, upgrading, revision)


def _parse(
    path: ManifestPath, raw: dict[str, Any], upgrading: bool, revision: int | None
) -> IndexManifest:
    version = int(raw.get("schema_version", 0))
    if version != SCHEMA_VERSION and not (upgrading and version in UPGRADABLE_VERSIONS):
        if version in UPGRADABLE_VERSIONS:
            raise IndexNeedsUpgradeError(
                f"the index at {path.parent} uses format {version}; run `ragline index` once "
                f"to upgrade it to format {SCHEMA_VERSION} in place (nothing is re-embedded)"
            )
        raise EmbedderMismatchError(
            f"the index at {path.parent} uses format {version}; this ragline needs "
            f"{SCHEMA_VERSION}: delete {path.parent} and run `ragline index`"
        )
    active = Generation.from_json(raw["active"]) if raw.get("active") else None
    building = Generation.from_json(raw["building"]) if raw.get("building") else None
    return IndexManifest(version, active, building, str(raw.get("updated_at", "")), revision)


def write_manifest(path: ManifestPath, manifest: IndexManifest) -> IndexManifest:
    """Write ``index.json`` atomically (readers see the old or the new file); returns
    the manifest as written. On object storage the write is conditional: it raises
    ManifestConflictError when another writer replaced the manifest since
    ``manifest`` was read."""
    payload = {
        "schema_version": manifest.schema_version,
        "active": manifest.active.as_json() if manifest.active else None,
        "building": manifest.building.as_json() if manifest.building else None,
        "updated_at": manifest.updated_at,
    }
    if isinstance(path, RemoteManifest):
        return replace(manifest, revision=_write_remote(path, payload, manifest.revision))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return manifest


def update_manifest(
    path: ManifestPath,
    change: Callable[[IndexManifest], IndexManifest],
    upgrading: bool = False,
) -> IndexManifest:
    """Read the manifest, apply ``change`` and write the result, again from a fresh
    read when another writer got in between (object storage); returns what was
    written (unchanged: nothing written)."""
    for _attempt in range(_CONFLICT_RETRIES):
        current = read_manifest(path, missing_ok=True, upgrading=upgrading)
        updated = change(current)
        if updated == current:
            return current
        try:
            return write_manifest(path, updated)
        except ManifestConflictError:
            continue
    raise ManifestConflictError(
        f"the index manifest at {path.parent} kept changing under {_CONFLICT_RETRIES} "
        "attempts to update it; are several `ragline index` runs writing at once? retry"
    )


# ---- on object storage: a one-row LanceDB table ------------------------------------

_MANIFEST_SCHEMA = None


def _schema() -> Any:
    import pyarrow as pa

    global _MANIFEST_SCHEMA
    if _MANIFEST_SCHEMA is None:
        _MANIFEST_SCHEMA = pa.schema([
            pa.field("id", pa.string(), nullable=False),
            pa.field("revision", pa.int64(), nullable=False),
            pa.field("body", pa.string(), nullable=False),
        ])  # fmt: skip
    return _MANIFEST_SCHEMA


_connections: dict[str, Any] = {}
_CONNECT_LOCK = threading.Lock()


def _database(path: RemoteManifest) -> Any:
    """One LanceDB connection per URI, seeing every commit at once (a manifest is read
    rarely: once per run, and by search at most once per read consistency interval)."""
    check_lancedb_cpu()
    import lancedb

    with _CONNECT_LOCK:
        if path.uri not in _connections:
            _connections[path.uri] = lancedb.connect(
                path.uri,
                read_consistency_interval=timedelta(0),
                storage_options=path.storage_options() or None,
            )
        return _connections[path.uri]


def _table(path: RemoteManifest, create: bool) -> Any:
    db = _database(path)
    try:
        return db.open_table(MANIFEST_TABLE)
    except (ValueError, FileNotFoundError):
        if not create:
            return None
    try:
        table = db.create_table(MANIFEST_TABLE, schema=_schema())
    except (ValueError, OSError):  # another writer created it first
        return db.open_table(MANIFEST_TABLE)
    table.set_unenforced_primary_key("id")  # a second row with the id is a conflict
    return table


def manifest_version(path: RemoteManifest) -> int:
    """The LanceDB version of the manifest table (-1: none yet): a cheap change stamp."""
    table = _table(path, create=False)
    return -1 if table is None else int(table.version)


def _read_remote(path: RemoteManifest) -> tuple[int, dict[str, Any]] | None:
    table = _table(path, create=False)
    if table is None:
        return None
    rows = table.search().where(f"id = '{_MANIFEST_ROW}'").limit(1).to_arrow().to_pylist()
    if not rows:
        return None
    return int(rows[0]["revision"]), json.loads(rows[0]["body"])


def _write_remote(path: RemoteManifest, payload: dict[str, Any], revision: int | None) -> int:
    """Store ``payload`` as revision ``revision + 1`` if the stored revision is still
    ``revision`` (0: none stored); returns the new revision."""
    import pyarrow as pa

    expected = revision or 0
    row = pa.table(
        {"id": [_MANIFEST_ROW], "revision": [expected + 1], "body": [json.dumps(payload)]},
        schema=_schema(),
    )
    table = _table(path, create=True)
    merge = table.merge_insert("id").when_matched_update_all(where=f"target.revision = {expected}")
    # Lance re-runs a merge that lost a commit race against the winner's data, so the
    # condition is judged on the latest revision: one writer matches, the others none.
    result = merge.when_not_matched_insert_all() if expected == 0 else merge
    outcome = result.execute(row)
    if outcome.num_updated_rows + outcome.num_inserted_rows != 1:
        raise ManifestConflictError(
            f"the index manifest at {path.uri} was changed by another writer since it was "
            f"read (revision {expected}); read it again and retry"
        )
    return expected + 1
