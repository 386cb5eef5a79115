"""``search`` limited to the sources a caller may see.

For a restricted caller, filters are validated against a vocabulary built from the
visible sources only, so an invisible source (or a tag or kind only it has) fails
exactly like a name that does not exist, and close-match suggestions never name it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields, replace
from typing import Any

from rag_serving.index.filters import (
    IndexVocabulary,
    SearchFilters,
    parse_date,
    validate_filters,
    with_kind_filters,
)
from rag_serving.mcp.auth import Access
from rag_serving.mcp.models import ContextOut, Hit, SearchOutput
from rag_serving.reading.context import HitContext
from rag_serving.search.engine import Mode, SearchEngine, SearchHit, is_stale
from rag_sources.errors import FilterError
from rag_sources.kinds import kind_filters


@dataclass(frozen=True)
class _SearchRequest:
    """A search as the tool received it (each kind's filters are fields too)."""

    query: str
    k: int | None = None
    mode: Mode | None = None
    rerank: bool | None = None
    expand: int | None = None
    collapse: bool | None = None
    sources: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    path_prefix: str | None = None
    tags: tuple[str, ...] = ()
    after: str | None = None
    before: str | None = None
    types: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()
    authors: tuple[str, ...] = ()

    def filters(self) -> SearchFilters:
        """The request's filters, its dates parsed (a bad one is a tool error)."""
        values = {f.name: getattr(self, f.name) for f in fields(SearchFilters)}
        # An empty date is a bad date, not an absent filter.
        after = parse_date(self.after, "after") if self.after is not None else None
        before = parse_date(self.before, "before") if self.before is not None else None
        if after and before and after >= before:
            raise FilterError(
                f"after {self.after} is not before before {self.before}: no item can match"
            )
        values["after"], values["before"] = after, before
        return SearchFilters(**values)


SearchRequest = with_kind_filters(_SearchRequest, tuple)
# The list-valued filters a search echoes back when given.
FILTER_LISTS = (
    "types", "languages", "symbols", "authors", *(f.name for f in kind_filters()),
)  # fmt: skip


class VisibleVocabularies:
    """Per set of visible sources: the names a filter may use (cached per index version)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[frozenset[str], tuple[int, IndexVocabulary]] = {}

    def get(self, engine: SearchEngine, sources: frozenset[str]) -> IndexVocabulary:
        store = engine.store
        version = store.documents().version if store.table_exists("documents") else -1
        with self._lock:
            cached = self._cache.get(sources)
            if cached and cached[0] == version:
                return cached[1]
        docs = store.read(
            "documents", columns=["source", "kind", "tags", "file_type", "facets"]
        ).to_pylist()
        vocabulary = IndexVocabulary.of_documents(
            [r for r in docs if r["source"] in sources],
            [(s.name, s.kind) for s in engine.config.sources if s.name in sources],
        )
        with self._lock:
            self._cache[sources] = (version, vocabulary)
        return vocabulary


def run_search(
    engine: SearchEngine,
    access: Access,
    request: SearchRequest,
    vocabularies: VisibleVocabularies,
) -> SearchOutput:
    """Search as ``access`` may: only its sources, failing loudly on unknown names."""
    filters = request.filters()
    if access.sources is not None:
        vocabulary = vocabularies.get(engine, access.sources)
        filters = validate_filters(filters, vocabulary)
        if not filters.sources:
            if not vocabulary.sources:
                return _output(request, engine, filters, [])
            filters = replace(filters, sources=tuple(sorted(vocabulary.sources)))
    result = engine.search(
        request.query,
        k=request.k,
        filters=filters,
        mode=request.mode,
        rerank=request.rerank,
        context=request.expand,
        collapse=request.collapse,
    )
    # (Only visible sources were searched: contexts never hold another source's text.)
    hits = [hit for hit in result.hits if access.can_see(hit.source)]
    return _output(request, engine, result.filters, hits, result.mode)


def _output(
    request: SearchRequest,
    engine: SearchEngine,
    filters: SearchFilters,
    hits: list[SearchHit],
    mode: str | None = None,
) -> SearchOutput:
    return SearchOutput(
        query=request.query,
        mode=mode or request.mode or engine.config.search.mode,
        filters=_filters_json(filters, request),
        hits=[hit_out(hit) for hit in hits],
        notice=engine.notice,
    )


def _filters_json(filters: SearchFilters, request: SearchRequest) -> dict[str, Any]:
    """The filters the caller asked for, normalised (never the implicit visible-source list)."""
    out: dict[str, Any] = {}
    if request.sources:
        out["sources"] = list(filters.sources)
    if filters.kinds:
        out["kinds"] = list(filters.kinds)
    if filters.path_prefix:
        out["path_prefix"] = filters.path_prefix
    if filters.tags:
        out["tags"] = list(filters.tags)
    if filters.after:
        out["after"] = filters.after.isoformat()
    if filters.before:
        out["before"] = filters.before.isoformat()
    for name in FILTER_LISTS:
        if getattr(filters, name):
            out[name] = list(getattr(filters, name))
    return out


def obsidian_anchor(path: str, heading: str) -> str:
    """``[[note#Heading#Sub]]`` for a chunk (the note without its extension)."""
    note = path.rsplit(".", 1)[0] if path.lower().endswith((".md", ".markdown")) else path
    parts = [part for part in heading.split(" > ") if part] if heading else []
    return "[[" + "#".join([note, *parts]) + "]]"


def hit_out(hit: SearchHit) -> Hit:
    """A search hit as the tool returns it."""
    return Hit(
        rank=hit.rank,
        score=round(hit.score, 6),
        source=hit.source,
        kind=hit.kind,
        path=hit.path,
        title=hit.title,
        heading=hit.anchor,
        anchor=obsidian_anchor(hit.path, hit.anchor),
        location=hit.location,
        file_type=hit.file_type,
        line_start=hit.line_start,
        line_end=hit.line_end,
        snippet=hit.snippet,
        chunk_id=hit.chunk_id,
        doc_id=hit.doc_id,
        modified=hit.modified.isoformat() if hit.modified else None,
        indexed_at=hit.indexed_at.isoformat() if hit.indexed_at else None,
        stale=is_stale(hit.stale),
        stale_reason=hit.stale,
        symbol=hit.symbol,
        language=hit.language,
        author=hit.author,
        context=_context_out(hit.context),
        more_sections=hit.more_sections,
        **hit.details,
    )


def _context_out(context: HitContext | None) -> ContextOut | None:
    if context is None:
        return None
    return ContextOut(
        section=context.section,
        line_start=context.line_start,
        line_end=context.line_end,
        text=context.text,
        complete=context.complete,
        same_as=context.same_as,
    )
