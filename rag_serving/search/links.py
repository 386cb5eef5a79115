"""The link prior: a note many notes link to, or one the other top hits link to, is
likely the answer (RAGtriever's boost_by_backlinks).

After fusion each candidate's score is multiplied by
``1 + backlinks · ln(1 + b) + linked · ln(1 + c)``, where ``b`` is how many other
documents link to its document and ``c`` how many of the other documents among the
``top`` best fused ones do. Fused scores are never negative (z-score, min-max and RRF
all start at 0), so the factor only lifts. A document without links, in an index
without any, keeps its score: the prior is a no-op there.

The counts come from the link graph of the ``documents`` table
(rag_serving/index/links.py), built once per table version, not per query, and kept
in a file beside the index, so a one-shot ``ragline search`` reads them (~20 ms for
the 6.5k notes of the Obsidian Hub) rather than resolving every link again.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_serving.index.links import LinkGraph
from rag_serving.search.fusion import FusedHit

# The kept counts file is read only below this size (the Hub's 6.5k notes: 1.3 MB); a
# larger one is ignored and the counts are built again.
MAX_COUNTS_BYTES = 256 * 2**20


@dataclass(frozen=True)
class LinkPriorSettings:
    """How much backlinks and links from the other top hits lift a hit."""

    backlinks: float = 0.4  # per ln(1 + documents linking to it)
    linked: float = 0.4  # per ln(1 + other top documents linking to it)
    top: int = 20  # how many of the best fused documents count as "the other top hits"


@dataclass(frozen=True)
class LinkCounts:
    """Per document: how many other documents link to it, and which it links to."""

    backlinks: Mapping[str, int]
    outgoing: Mapping[str, frozenset[str]]

    @classmethod
    def of_graph(cls, graph: LinkGraph) -> LinkCounts:
        backlinks = {
            doc_id: len({edge.origin.doc_id for edge in edges})
            for doc_id, edges in graph.incoming.items()
            if edges
        }
        outgoing = {}
        for doc_id, edges in graph.outgoing.items():
            targets = frozenset(
                e.resolved.doc_id
                for e in edges
                if e.resolved is not None and e.resolved.doc_id != doc_id
            )
            if targets:
                outgoing[doc_id] = targets
        return cls(backlinks, outgoing)

    def __bool__(self) -> bool:
        return bool(self.backlinks)

    def save(self, path: Path, key: dict[str, Any]) -> None:
        """Keep the counts in ``path`` for the index state ``key``; best effort (a
        read-only search host builds them in each process instead)."""
        payload = {
            "key": key,
            "backlinks": dict(self.backlinks),
            "outgoing": {doc: sorted(targets) for doc, targets in self.outgoing.items()},
        }
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            partial.write_text(json.dumps(payload))
            os.replace(partial, path)
        except OSError:
            partial.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path, key: dict[str, Any]) -> LinkCounts | None:
        """The counts kept in ``path`` for ``key``; None when absent, unreadable, over
        ``MAX_COUNTS_BYTES``, malformed or kept for another state of the index."""
        try:
            if path.stat().st_size > MAX_COUNTS_BYTES:
                return None
            payload = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(payload, dict) or payload.get("key") != key:
            return None
        backlinks, outgoing = payload.get("backlinks"), payload.get("outgoing")
        if not isinstance(backlinks, dict) or not isinstance(outgoing, dict):
            return None
        try:
            kept = {doc: frozenset(str(t) for t in targets) for doc, targets in outgoing.items()}
            counts = {str(doc): int(n) for doc, n in backlinks.items()}
        except (TypeError, ValueError):
            return None
        return cls(counts, kept)


@dataclass(frozen=True)
class LinkLift:
    """Why a hit's score moved: its counts, the factor and the score before it."""

    backlinks: int
    linked_from_top: int
    factor: float
    fused_score: float

    def as_dict(self) -> dict[str, float]:
        return {
            "backlinks": self.backlinks,
            "linked_from_top": self.linked_from_top,
            "factor": self.factor,
            "fused_score": self.fused_score,
        }


def with_link_prior(
    fused: Sequence[FusedHit],
    doc_of: Mapping[str, str],
    counts: LinkCounts,
    settings: LinkPriorSettings,
) -> tuple[list[FusedHit], dict[str, LinkLift]]:
    """``fused`` re-scored by the link prior and re-sorted (ties keep their order), with
    the lift of each hit whose score changed. ``doc_of``: chunk id → document id (a
    chunk missing from it keeps its score)."""
    if not counts or not fused:
        return list(fused), {}
    top_docs: list[str] = []
    for hit in fused:
        doc = doc_of.get(hit.id)
        if doc is not None and doc not in top_docs:
            top_docs.append(doc)
            if len(top_docs) == settings.top:
                break
    linked: dict[str, int] = {}
    for origin in top_docs:
        for target in counts.outgoing.get(origin, ()):
            linked[target] = linked.get(target, 0) + 1
    lifts: dict[str, LinkLift] = {}
    rescored: list[FusedHit] = []
    for hit in fused:
        doc = doc_of.get(hit.id)
        backlinks = counts.backlinks.get(doc, 0) if doc is not None else 0
        # links from the other top documents: never its own link to itself
        from_top = linked.get(doc, 0) if doc is not None else 0
        factor = 1.0
        if backlinks or from_top:
            factor += settings.backlinks * math.log1p(backlinks)
            factor += settings.linked * math.log1p(from_top)
        if factor != 1.0:
            lifts[hit.id] = LinkLift(backlinks, from_top, factor, hit.score)
            hit = FusedHit(hit.id, hit.score * factor, hit.explain)
        rescored.append(hit)
    order = sorted(range(len(rescored)), key=lambda i: (-rescored[i].score, i))
    return [rescored[i] for i in order], lifts
