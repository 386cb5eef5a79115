"""Search filters a kind adds (``--from`` for mail, ``--series`` for books…).

A kind's items carry facets (``from:alice@example.org``, ``series:modernist poems``)
that the chunk stage copies onto every chunk. A ``FacetFilter`` a kind declares in
its ``KindInfo`` becomes a ``ragline search`` option, an argument of the MCP
``search`` tool and a field of ``SearchFilters``: a chunk passes when one of its
facets matches one of the values given. What the index holds is the filter's
vocabulary; an unknown value is an error with close matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Search's own filters and options, which no kind's filter may take.
CORE_FILTER_NAMES = frozenset({
    "sources", "kinds", "path_prefix", "tags", "after", "before", "types", "languages",
    "symbols", "authors", "query", "k", "mode", "rerank",
    "--source", "--kind", "--path", "--tag", "--after", "--before", "--type", "--language",
    "--symbol", "--author", "--k", "--mode", "--json", "--explain", "--rerank", "--no-rerank",
    "--config", "--help",
})  # fmt: skip
# How values are compared: "name" lowercased with runs of blanks as one space (how a
# kind stores names in facets); "folder" without leading and trailing slashes.
Fold = Literal["name", "folder"]


@dataclass(frozen=True)
class FacetFilter:
    """One filter of a kind."""

    name: str  # the field of SearchFilters and the MCP argument (plural): "senders"
    option: str  # the `ragline search` option: "--from"
    facets: tuple[str, ...]  # the facet names a value matches: ("from",)
    help: str  # for `ragline search --help`
    description: str  # for the MCP tool's schema
    unknown: str  # how an error starts: "no indexed message is from"
    singular: str  # one value, in messages: "sender"
    fold: Fold = "name"
    # Listed after an unknown value, for filters with few values ("folders"); None
    # for filters with many (people), where only close matches are named.
    indexed: str | None = None
    hint: str = ""  # after an unknown value: "(give a name or an e-mail address)"
    aliases: tuple[str, ...] = ()  # other argument names an agent may use: ("from",)

    def folded(self, values: tuple[str, ...]) -> tuple[str, ...]:
        """``values`` as the index stores them, duplicates dropped."""
        if self.fold == "folder":
            return tuple(dict.fromkeys(v.strip().strip("/") for v in values))
        return tuple(dict.fromkeys(" ".join(v.split()).lower() for v in values))

    def facet_group(self, values: tuple[str, ...]) -> tuple[str, ...]:
        """The facets of which a chunk must have one."""
        return tuple(f"{name}:{value}" for value in values for name in self.facets)
