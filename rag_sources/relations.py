"""What a kind adds to MCP ``neighbors``: lists of documents related to one
(a message's thread, the commits that changed a file).

A kind declares its relations in its ``KindInfo``; ``neighbors`` answers each under
its ``name``, for any document, with the entries ``find`` returns (an empty list
where the relation does not apply). ``find`` reads the index's ``documents`` table
through ``ReadDocuments``, which the serving side passes in, so a kind never
imports the index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

# The lists `neighbors` has for every document, which no kind's relation may take.
RESERVED_NAMES = frozenset({"note", "links", "embeds", "backlinks", "symbols", "omitted"})
# (where clause, columns) → rows of the `documents` table, as dicts.
ReadDocuments = Callable[[str, list[str]], list[dict[str, Any]]]


@dataclass(frozen=True)
class Incoming:
    """A document that links to the one asked about."""

    doc_id: str
    path: str


@dataclass(frozen=True)
class Relation:
    """One list ``neighbors`` answers with."""

    name: str  # the field of `neighbors`' answer: "thread", "commits"
    item: type[BaseModel]  # one entry of the list (its fields are the tool's schema)
    description: str  # for the tool's schema: when the list is not empty
    # (read, the document's row, the documents linking to it) → the entries.
    find: Callable[[ReadDocuments, dict[str, Any], list[Incoming]], list[BaseModel]]
    # A link from a document at this path is listed here, not among `backlinks`.
    claims_link_from: Callable[[str], bool] | None = None


def facet_value(facets: list[str] | None, name: str) -> str | None:
    """The value of the first ``name:value`` facet, or None."""
    prefix = name + ":"
    return next((f[len(prefix) :] for f in facets or () if f.startswith(prefix)), None)
