"""Stage 1 (``raw_files``): list a source's items and hash what changed.

An item listed with a problem (a link leading outside the source, a name that is not
valid UTF-8, a folder that cannot be read) is stored with its reason in ``error``
and, in ``fingerprint``, what the parse stage makes of it (``PROBLEM_MARKS``). What
the index holds for an unavailable item, and under an unavailable folder, is kept:
only items really gone are deleted. A source that lists nothing at all while the
index holds items of it (an unmounted disk's empty mount point) fails its run
instead of emptying its index; a full run (``ragline index --full``) empties it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from rag_assets.progress import report
from rag_assets.sources import ItemStat, SourceKind
from rag_assets.stages.result import StageResult, utcnow
from rag_serving.index import schema as schemas
from rag_serving.index.ids import doc_id
from rag_serving.index.store import IndexStore
from rag_sources.errors import SourceUnavailableError
from rag_sources.formats.model import ItemSkipped
from rag_sources.kinds.base import ChangedItems
from rag_sources.scanning import display_path
from rag_sources.where import sql_in, sql_string

# ``files.fingerprint`` of an item with a problem → (severity, whether what the index
# holds for the item is kept).
SKIPPED_MARK = "!skipped"  # not indexed by rule: its document is removed
ERROR_MARK = "!error"  # could not be indexed: its document is removed
UNAVAILABLE_MARK = "!unavailable"  # cannot be read now: its document is kept
PROBLEM_MARKS = {
    SKIPPED_MARK: ("skipped", False),
    ERROR_MARK: ("error", False),
    UNAVAILABLE_MARK: ("error", True),
}


def scan_source(
    store: IndexStore, kind: SourceKind, full: bool, changed: list[Path] | None = None
) -> StageResult:
    """Update the ``files`` table for the source of ``kind``.

    An item whose fingerprint (a file's size and mtime) is unchanged costs only its
    listing; others are read and hashed. With ``full`` every item is re-hashed.

    With ``changed`` (the paths file-system events named), only the items at and
    under those paths are listed and compared, when the kind can list them alone
    (``SourceKind.list_changed``); ``result.scope`` then holds the doc ids the run
    touched, for the later stages. Otherwise the whole source is listed.
    """
    result = StageResult()
    name = kind.config.name
    scope = f"source = {sql_string(name)}"
    columns = ["doc_id", "path", "size", "mtime_ns", "fingerprint", "content_hash", "error"]
    listing = None if full or changed is None else kind.list_changed(changed)
    where = scope if listing is None else f"{scope} AND ({_covered_sql(listing)})"
    previous = {
        r["doc_id"]: r for r in store.read("files", where=where, columns=columns).to_pylist()
    }
    seen: set[str] = set()
    upserts: list[dict] = []
    now = utcnow()
    listed = kind.list_items() if listing is None else listing.items
    items = [_checked(item) for item in listed]
    if not items and previous and not full and listing is None:
        # An unmounted disk often leaves its mount point behind, empty: that is not
        # every note deleted at once.
        raise SourceUnavailableError(
            f"source {name!r}: {kind.location} lists nothing but the index holds "
            f"{len(previous)} item(s) of it (an unmounted disk?); mount it, or run "
            f"`ragline index --full {name}` to remove them from the index"
        )
    for position, item in enumerate(items, start=1):
        key = doc_id(name, item.key)
        if key in seen:
            continue  # two names shown alike (a repaired one and a real one): listed once
        seen.add(key)
        old = previous.get(key)
        if item.problem is not None:
            row = _problem_row(name, item, old, now)
            if row is None:
                result.unchanged += 1
            else:
                upserts.append(row)
                if row["fingerprint"] == SKIPPED_MARK:
                    result.skipped += 1
                else:
                    result.failed += 1
            continue
        if (
            not full
            and old is not None
            and old["fingerprint"] == item.fingerprint
            and not old["error"]
        ):
            result.unchanged += 1
            continue
        digest, error, mark = _hash(kind, item)
        row = {
            "doc_id": key,
            "source": name,
            "path": item.key,
            "size": item.size,
            "mtime_ns": item.mtime_ns,
            "content_hash": digest,
            "error": error,
            "seen_at": now,
            "fingerprint": mark or item.fingerprint,
        }
        if mark == SKIPPED_MARK:
            result.skipped += 1
        elif error:
            result.failed += 1
            if old is not None:  # cannot be read now: the index keeps what it had
                row.update({k: old[k] for k in ("size", "mtime_ns", "content_hash")})
        elif old is None:
            result.new += 1
        elif old["content_hash"] != digest:
            result.changed += 1
        else:
            result.unchanged += 1  # touched: same bytes, new fingerprint
        upserts.append(row)
        if position % 200 == 0:
            report(name, "scan", position, len(items))
    # Under a folder that cannot be read now, nothing is deleted: it is not gone.
    kept = tuple(i.key for i in items if i.unavailable and i.key.endswith("/"))
    gone = []
    for key, row in previous.items():
        if key in seen:
            continue
        if kept and row["path"].startswith(kept):
            result.extra["kept_unavailable"] = int(result.extra.get("kept_unavailable", 0)) + 1
        else:
            gone.append(key)
    result.deleted = len(gone)
    if upserts or gone:
        store.apply_changes(
            "files",
            schemas.FILES,
            pa.Table.from_pylist(upserts, schemas.FILES) if upserts else None,
            delete_where=f"{scope} AND {sql_in('doc_id', gone)}" if gone else None,
        )
    report(name, "scan", len(items), len(items))
    if listing is None:
        result.row_count = len(seen)
    else:
        result.row_count = store.count("files", scope)
        result.scope = sorted(seen | set(gone))
    return result


def listing_is_indexed(store: IndexStore, kind: SourceKind, items: list[ItemStat]) -> bool:
    """Whether a scan of ``items`` (the whole listing) would find nothing to do: no
    item new, changed or gone (an item the index holds with a read error counts as
    indexed: a scan can only try it again)."""
    name = kind.config.name
    columns = ["doc_id", "path", "size", "mtime_ns", "fingerprint", "content_hash", "error"]
    where = f"source = {sql_string(name)}"
    previous = {
        r["doc_id"]: r for r in store.read("files", where=where, columns=columns).to_pylist()
    }
    seen: set[str] = set()
    for item in (_checked(i) for i in items):
        key = doc_id(name, item.key)
        seen.add(key)
        old = previous.get(key)
        if old is None:
            return False
        if item.problem is not None:
            if _problem_row(name, item, old, None) is not None:
                return False
        elif old["fingerprint"] != item.fingerprint and not old["error"]:
            return False
    kept = tuple(i.key for i in items if i.unavailable and i.key.endswith("/"))
    return all(
        key in seen or (kept and row["path"].startswith(kept)) for key, row in previous.items()
    )


def _covered_sql(listing: ChangedItems) -> str:
    """A filter on ``files.path`` for the keys ``listing`` speaks for."""
    exact = [k for k in listing.covered if not k.endswith("/")]
    parts = [sql_in("path", exact)] if exact else []
    parts += [f"starts_with(path, {sql_string(k)})" for k in listing.covered if k.endswith("/")]
    return " OR ".join(parts) or "FALSE"


def _checked(item: ItemStat) -> ItemStat:
    """``item``, or a problem item when its key is not valid text (a name that is not
    UTF-8): it could be neither stored nor shown, and must not fail the source."""
    try:
        item.key.encode("utf-8")
    except UnicodeEncodeError:
        message = "name is not valid UTF-8; rename it"
        return replace(item, key=display_path(item.key), problem=message, severity="skipped")
    return item


def _problem_row(
    source: str, item: ItemStat, old: dict[str, Any] | None, now: Any
) -> dict[str, Any] | None:
    """The files row of an item listed with a problem (None when it is unchanged)."""
    if item.unavailable:
        mark = UNAVAILABLE_MARK
    else:
        mark = SKIPPED_MARK if item.severity == "skipped" else ERROR_MARK
    if old is not None and old["fingerprint"] == mark and old["error"] == item.problem:
        return None
    keep = mark == UNAVAILABLE_MARK and old is not None
    return {
        "doc_id": doc_id(source, item.key),
        "source": source,
        "path": item.key,
        "size": old["size"] if keep else item.size,
        "mtime_ns": old["mtime_ns"] if keep else item.mtime_ns,
        "content_hash": old["content_hash"] if keep else None,
        "error": item.problem,
        "seen_at": now,
        "fingerprint": mark,
    }


def _hash(kind: SourceKind, item: ItemStat) -> tuple[str | None, str | None, str | None]:
    """(content hash, error, problem mark) of one item."""
    try:
        return kind.content_hash(item), None, None
    except ItemSkipped as exc:
        return None, str(exc), SKIPPED_MARK
    except OSError as exc:
        message = f"cannot read the file ({exc.strerror or exc}); check its permissions"
        return None, message + " (what the index holds for it is kept)", UNAVAILABLE_MARK
