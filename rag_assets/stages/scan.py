"""Stage 1 (``raw_files``): list a source's items and hash what changed."""

from __future__ import annotations

import pyarrow as pa

from rag_assets.progress import report
from rag_assets.sources import ItemStat, SourceKind
from rag_assets.stages.result import StageResult, utcnow
from rag_serving.index import schema as schemas
from rag_serving.index.ids import doc_id
from rag_serving.index.store import IndexStore, sql_in, sql_string


def scan_source(store: IndexStore, kind: SourceKind, full: bool) -> StageResult:
    """Update the ``files`` table for the source of ``kind``.

    An item whose fingerprint (a file's size and mtime) is unchanged costs only its
    listing; others are read and hashed. With ``full`` every item is re-hashed.
    """
    result = StageResult()
    name = kind.config.name
    scope = f"source = {sql_string(name)}"
    columns = ["doc_id", "fingerprint", "content_hash", "error"]
    previous = {
        r["doc_id"]: r for r in store.read("files", where=scope, columns=columns).to_pylist()
    }
    seen: set[str] = set()
    upserts: list[dict] = []
    now = utcnow()
    items = list(kind.list_items())
    for position, item in enumerate(items, start=1):
        key = doc_id(name, item.key)
        seen.add(key)
        old = previous.get(key)
        if (
            not full
            and old is not None
            and old["fingerprint"] == item.fingerprint
            and not old["error"]
        ):
            result.unchanged += 1
            continue
        digest, error = _hash(kind, item)
        if error:
            result.failed += 1
        elif old is None:
            result.new += 1
        elif old["content_hash"] != digest:
            result.changed += 1
        else:
            result.unchanged += 1  # touched: same bytes, new fingerprint
        upserts.append(
            {
                "doc_id": key,
                "source": name,
                "path": item.key,
                "size": item.size,
                "mtime_ns": item.mtime_ns,
                "content_hash": digest,
                "error": error,
                "seen_at": now,
                "fingerprint": item.fingerprint,
            }
        )
        if position % 200 == 0:
            report(name, "scan", position, len(items))
    gone = [key for key in previous if key not in seen]
    result.deleted = len(gone)
    if upserts or gone:
        store.apply_changes(
            "files",
            schemas.FILES,
            pa.Table.from_pylist(upserts, schemas.FILES) if upserts else None,
            delete_where=f"{scope} AND {sql_in('doc_id', gone)}" if gone else None,
        )
    report(name, "scan", len(items), len(items))
    result.row_count = len(seen)
    return result


def _hash(kind: SourceKind, item: ItemStat) -> tuple[str | None, str | None]:
    try:
        return kind.content_hash(item), None
    except OSError as exc:
        return None, f"cannot read the file: {exc.strerror or exc}; check its permissions"
