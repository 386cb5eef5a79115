"""A mail message's thread, the mail kind's relation in ``neighbors``: every message of its source joined to
it through Message-ID, In-Reply-To and References, followed transitively.

Each message stores as facets its thread id (the first of References, else
In-Reply-To, else its own id), its own id, and every id it answers or cites
(``refers:``). A reply whose References were cut by a client names a different root,
so one lookup by thread id misses part of the thread; following the ids round by
round in both directions (a union-find restricted to this one thread, each round one
indexed query) joins them.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from rag_sources.relations import Incoming, ReadDocuments, Relation, facet_value
from rag_sources.where import sql_string

MAX_THREAD_MESSAGES = 200  # a thread longer than this lists its oldest messages
MAX_ROUNDS = 8  # each round follows one more hop of replies
MAX_IDS = 400  # ids looked up at once (a runaway References chain stops here)
_COLUMNS = ["doc_id", "path", "title", "modified", "frontmatter_json", "facets"]


class MessageOut(BaseModel):
    """A message of a mail thread."""

    doc_id: str = Field(description="Open the message with it.")
    path: str
    subject: str
    sender: str | None
    date: str | None
    message_id: str | None
    in_reply_to: str | None = Field(description="The message-id it answers, if any.")


def thread_messages(
    read: ReadDocuments, doc: dict[str, Any], incoming: list[Incoming] | None = None
) -> list[BaseModel]:
    """Every message of ``doc``'s thread (``doc`` is a message or an attachment),
    oldest first; empty for anything else."""
    thread = facet_value(doc.get("facets"), "thread")
    if thread is None:
        return []
    found: dict[str, dict[str, Any]] = {}
    ids = {thread} | _ids_of(doc)
    asked: set[str] = set()
    for _ in range(MAX_ROUNDS):
        new = sorted(ids - asked)[: MAX_IDS - len(asked)]
        if not new:
            break
        asked.update(new)
        for row in _messages_naming(read, doc["source"], new):
            if row["doc_id"] not in found:
                found[row["doc_id"]] = row
                ids |= _ids_of(row)
    rows = sorted(
        found.values(), key=lambda r: (r["modified"] is None, r["modified"] or 0, r["path"])
    )
    return [_message_out(row) for row in rows[:MAX_THREAD_MESSAGES]]


def _messages_naming(read: ReadDocuments, source: str, ids: list[str]) -> list[dict[str, Any]]:
    """Messages whose own id or thread id is one of ``ids``, or that answer or cite
    one of them."""
    either = " OR ".join(
        f"array_has(facets, {sql_string(f'{name}:{value}')})"
        for value in ids
        for name in ("thread", "message_id", "refers")
    )
    where = f"source = {sql_string(source)} AND file_type = 'email' AND ({either})"
    return read(where, _COLUMNS)


def _ids_of(row: dict[str, Any]) -> set[str]:
    """The ids a message (or an attachment) names: its own, its thread's, the one it
    answers and its References."""
    ids = {v for v in (facet_value(row.get("facets"), n) for n in ("thread", "message_id")) if v}
    meta = json.loads(row.get("frontmatter_json") or "{}")
    for value in [meta.get("message_id"), meta.get("in_reply_to"), *(meta.get("references") or [])]:
        if isinstance(value, str) and value.strip("<>"):
            ids.add(value.strip().strip("<>"))
    return ids


def _message_out(row: dict[str, Any]) -> MessageOut:
    meta = json.loads(row["frontmatter_json"] or "{}")
    sender = meta.get("from") or {}
    return MessageOut(
        doc_id=row["doc_id"],
        path=row["path"],
        subject=row["title"],
        sender=sender.get("name") or sender.get("address") or None,
        date=row["modified"].isoformat() if row["modified"] else None,
        message_id=meta.get("message_id"),
        in_reply_to=meta.get("in_reply_to"),
    )


THREAD = Relation(
    name="thread",
    item=MessageOut,
    description="For a mail message (or an attachment): every message of its thread, "
    "oldest first, this one included.",
    find=thread_messages,
)
