"""What a kind adds to a search hit: details read from its facets (a message's mail
folder, a feed entry's feed) and the line a person sees for it in ``ragline search``.

A ``HitDetail`` becomes a field of every hit (``--json``, the MCP ``search`` tool's
``Hit``), set where the chunk has the facet. A kind's ``byline`` gives the dim part of
its hits' line (who, when, where); None keeps the common line (title › heading and
source:path:lines, or a code chunk's symbol).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

# A hit's own fields, which no kind's detail may take.
CORE_HIT_FIELDS = frozenset({
    "rank", "score", "source", "kind", "path", "title", "heading", "anchor", "location",
    "file_type", "line_start", "line_end", "lines", "snippet", "chunk_id", "doc_id",
    "modified", "indexed_at", "stale", "stale_reason", "symbol", "language", "author",
    "explain", "details",
})  # fmt: skip


@dataclass(frozen=True)
class HitDetail:
    name: str  # the hit's field: "folder"
    facet: str  # the facet it is read from: "folder", "feed_name"
    description: str  # for the MCP tool's schema: "Message: its mail folder."


class HitView(Protocol):
    """What a byline may read of a hit."""

    @property
    def source(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def modified(self) -> datetime | None: ...
    @property
    def author(self) -> str | None: ...
    @property
    def file_type(self) -> str | None: ...
    @property
    def details(self) -> Mapping[str, str]: ...


Byline = Callable[[HitView], str | None]


def hit_date(hit: HitView) -> str:
    """The hit's date as YYYY-MM-DD, or ``?``."""
    return hit.modified.date().isoformat() if hit.modified else "?"
