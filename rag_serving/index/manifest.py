"""``index.json``: the schema version and the embedder fingerprint of an index."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rag_serving.embedders.base import EmbedderFingerprint
from rag_serving.errors import EmbedderMismatchError, IndexNotBuiltError
from rag_serving.index.schema import SCHEMA_VERSION


@dataclass(frozen=True)
class IndexManifest:
    schema_version: int
    fingerprint: EmbedderFingerprint
    created_at: str


def read_manifest(path: Path) -> IndexManifest:
    """Read ``index.json``; IndexNotBuiltError if there is none yet."""
    if not path.is_file():
        raise IndexNotBuiltError(f"no index at {path.parent} yet; build it with `ragline index`")
    raw = json.loads(path.read_text(encoding="utf-8"))
    return IndexManifest(
        schema_version=int(raw["schema_version"]),
        fingerprint=EmbedderFingerprint(**raw["embedder"]),
        created_at=str(raw.get("created_at", "")),
    )


def write_manifest(path: Path, fingerprint: EmbedderFingerprint) -> IndexManifest:
    """Write ``index.json`` atomically for a new index."""
    manifest = IndexManifest(SCHEMA_VERSION, fingerprint, datetime.now(UTC).isoformat())
    payload = {
        "schema_version": manifest.schema_version,
        "embedder": fingerprint.as_dict(),
        "created_at": manifest.created_at,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return manifest


def ensure_compatible(manifest: IndexManifest, fingerprint: EmbedderFingerprint) -> None:
    """Raise EmbedderMismatchError when the index was built with another embedder."""
    if manifest.schema_version != SCHEMA_VERSION:
        raise EmbedderMismatchError(
            f"the index uses format {manifest.schema_version}, this ragline needs "
            f"{SCHEMA_VERSION}; rebuild it with `ragline index --full`"
        )
    if manifest.fingerprint != fingerprint:
        raise EmbedderMismatchError(
            f"the index was built with {manifest.fingerprint.describe()} but the config "
            f"asks for {fingerprint.describe()}; run `ragline index --full` to re-embed, "
            "or set [embedder] back"
        )
