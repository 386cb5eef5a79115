"""``index.json``: which generation of vectors search uses, and which is being built.

A *generation* is the served chunks table (``chunks_<key>``) and its Tantivy index
(``fulltext/<key>``) made with one embedder fingerprint. Changing the embedder
builds a new generation beside the active one; search keeps using the active one
until the new one holds every source, then the manifest switches atomically.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_serving.embedders.base import EmbedderFingerprint
from rag_serving.errors import EmbedderMismatchError, IndexNeedsUpgradeError, IndexNotBuiltError
from rag_serving.index.schema import SCHEMA_VERSION, UPGRADABLE_VERSIONS


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
        return IndexManifest(self.schema_version, self.building, None, _now())


def _now() -> str:
    return datetime.now(UTC).isoformat()


def empty_manifest() -> IndexManifest:
    return IndexManifest(SCHEMA_VERSION, None, None, _now())


def read_manifest(path: Path, missing_ok: bool = False, upgrading: bool = False) -> IndexManifest:
    """Read ``index.json``; IndexNotBuiltError if there is none yet (unless ``missing_ok``).

    An older format that can be upgraded in place is an error telling to run
    ``ragline index`` (which upgrades it), unless ``upgrading``.
    """
    if not path.is_file():
        if missing_ok:
            return empty_manifest()
        raise IndexNotBuiltError(f"no index at {path.parent} yet; build it with `ragline index`")
    raw = json.loads(path.read_text(encoding="utf-8"))
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
    return IndexManifest(version, active, building, str(raw.get("updated_at", "")))


def write_manifest(path: Path, manifest: IndexManifest) -> None:
    """Write ``index.json`` atomically (readers see the old or the new file)."""
    payload = {
        "schema_version": manifest.schema_version,
        "active": manifest.active.as_json() if manifest.active else None,
        "building": manifest.building.as_json() if manifest.building else None,
        "updated_at": manifest.updated_at,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
