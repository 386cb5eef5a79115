"""A mail message's thread, for ``neighbors``: the messages of its source that share
its thread id (the root message-id), plus the root itself."""

from __future__ import annotations

import json
from typing import Any

from rag_serving.index.store import IndexStore, sql_string
from rag_serving.mcp.models import MessageOut

MAX_THREAD_MESSAGES = 200  # a thread longer than this lists its oldest messages


def thread_messages(store: IndexStore, doc: dict[str, Any]) -> list[MessageOut]:
    """Every message of ``doc``'s thread (``doc`` is a message or an attachment),
    oldest first; empty for anything else."""
    thread = _facet(doc.get("facets"), "thread")
    if thread is None:
        return []
    either = " OR ".join(
        f"array_has(facets, {sql_string(value)})"
        for value in (f"thread:{thread}", f"message_id:{thread}")
    )
    rows = store.read(
        "documents",
        where=f"source = {sql_string(doc['source'])} AND file_type = 'email' AND ({either})",
        columns=["doc_id", "path", "title", "modified", "frontmatter_json", "facets"],
    ).to_pylist()
    rows.sort(key=lambda r: (r["modified"] is None, r["modified"] or 0, r["path"]))
    out = []
    for row in rows[:MAX_THREAD_MESSAGES]:
        meta = json.loads(row["frontmatter_json"] or "{}")
        sender = meta.get("from") or {}
        out.append(
            MessageOut(
                doc_id=row["doc_id"],
                path=row["path"],
                subject=row["title"],
                sender=sender.get("name") or sender.get("address") or None,
                date=row["modified"].isoformat() if row["modified"] else None,
                message_id=meta.get("message_id"),
                in_reply_to=meta.get("in_reply_to"),
            )
        )
    return out


def _facet(facets: list[str] | None, name: str) -> str | None:
    prefix = name + ":"
    return next((f[len(prefix) :] for f in facets or () if f.startswith(prefix)), None)
