"""Stage 1 (``raw_files``): list a source's files and hash what changed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from rag_assets.progress import report
from rag_assets.stages.result import StageResult, utcnow
from rag_serving.config import MarkdownSourceConfig
from rag_serving.index import schema as schemas
from rag_serving.index.ids import content_hash, doc_id
from rag_serving.index.store import IndexStore, sql_in, sql_string
from rag_serving.scanning import iter_source_files


def scan_source(store: IndexStore, source: MarkdownSourceConfig, full: bool) -> StageResult:
    """Update the ``files`` table for ``source``.

    A file whose size and mtime are unchanged costs a stat; others are read and
    hashed. With ``full`` every file is re-hashed.
    """
    result = StageResult()
    scope = f"source = {sql_string(source.name)}"
    columns = ["doc_id", "size", "mtime_ns", "content_hash", "error"]
    previous = {
        r["doc_id"]: r for r in store.read("files", where=scope, columns=columns).to_pylist()
    }
    seen: set[str] = set()
    upserts: list[dict] = []
    now = utcnow()
    root = Path(source.path)
    stats = list(iter_source_files(source))
    for position, stat in enumerate(stats, start=1):
        key = doc_id(source.name, stat.path)
        seen.add(key)
        old = previous.get(key)
        if (
            not full
            and old is not None
            and old["size"] == stat.size
            and old["mtime_ns"] == stat.mtime_ns
            and not old["error"]
        ):
            result.unchanged += 1
            continue
        digest, error = _hash_file(root / stat.path)
        if error:
            result.failed += 1
        elif old is None:
            result.new += 1
        elif old["content_hash"] != digest:
            result.changed += 1
        else:
            result.unchanged += 1  # touched: same bytes, new stat
        upserts.append(
            {
                "doc_id": key,
                "source": source.name,
                "path": stat.path,
                "size": stat.size,
                "mtime_ns": stat.mtime_ns,
                "content_hash": digest,
                "error": error,
                "seen_at": now,
            }
        )
        if position % 200 == 0:
            report(source.name, "scan", position, len(stats))
    gone = [key for key in previous if key not in seen]
    result.deleted = len(gone)
    if upserts or gone:
        store.apply_changes(
            "files",
            schemas.FILES,
            pa.Table.from_pylist(upserts, schemas.FILES) if upserts else None,
            delete_where=f"{scope} AND {sql_in('doc_id', gone)}" if gone else None,
        )
    report(source.name, "scan", len(stats), len(stats))
    result.row_count = len(seen)
    return result


def _hash_file(path: Path) -> tuple[str | None, str | None]:
    try:
        return content_hash(path.read_bytes()), None
    except OSError as exc:
        return None, f"cannot read the file: {exc.strerror or exc}; check its permissions"
