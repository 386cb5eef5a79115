"""A record's channel: a search filter and a ``neighbors`` list of its own."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rag_sources.filters import FacetFilter
from rag_sources.relations import Incoming, ReadDocuments, Relation, facet_value
from rag_sources.where import sql_string

CHANNEL = FacetFilter(
    name="channels",
    option="--channel",
    facets=("channel",),
    help="Only records of this channel (repeatable).",
    description="Only records of these channels.",
    unknown="no indexed record is in channel",
    singular="channel",
    indexed="channels",
    aliases=("channel",),
)


class RecordOut(BaseModel):
    doc_id: str
    id: str
    title: str


def same_channel(
    read: ReadDocuments, doc: dict[str, Any], incoming: list[Incoming]
) -> list[BaseModel]:
    """The other records of the document's channel."""
    channel = facet_value(doc.get("facets"), "channel")
    if channel is None:
        return []
    where = (
        f"source = {sql_string(doc['source'])} AND "
        f"array_has(facets, {sql_string('channel:' + channel)})"
    )
    rows = read(where, ["doc_id", "path", "title"])
    return [
        RecordOut(doc_id=r["doc_id"], id=r["path"], title=r["title"])
        for r in sorted(rows, key=lambda r: r["path"])
        if r["doc_id"] != doc["doc_id"]
    ]


SAME_CHANNEL = Relation(
    name="same_channel",
    item=RecordOut,
    description="For a record of a JSON-lines export: the other records of its channel.",
    find=same_channel,
)
