"""What the MCP tools do, for a given caller: one warm ``SearchEngine`` behind them.

The engine is opened once and kept; it sees index versions written by other
processes on its own (LanceDB read consistency, Tantivy reload, manifest re-read).
Every method takes the caller's ``Access`` and never returns a source it cannot see.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from rag_serving.config import RaglineConfig
from rag_serving.index.links import Edge, LinkGraphCache, Note
from rag_serving.index.store import IndexStore
from rag_serving.mcp.auth import Access
from rag_serving.mcp.documents import Located, check_source, locate
from rag_serving.mcp.models import (
    BacklinkOut,
    DocRef,
    FileIssueOut,
    LinkOut,
    ListSourcesOutput,
    NeighborsOutput,
    OpenOutput,
    ProblemGroupOut,
    ReindexOutput,
    SearchOutput,
    SourceInfo,
    SourceStatusOut,
    StatusOutput,
)
from rag_serving.mcp.reindex import Reindexer
from rag_serving.mcp.search import SearchRequest, VisibleVocabularies, run_search
from rag_serving.mcp.symbols import file_symbols
from rag_serving.mcp.tool_errors import redact_paths
from rag_serving.reading.code import symbol_range
from rag_serving.reading.excerpts import Body, RangeError
from rag_serving.search.engine import SearchEngine, is_stale
from rag_serving.status import (
    MAX_ISSUE_GROUPS,
    MAX_LISTED_ISSUES,
    SEVERITIES,
    SourceStatus,
    index_status,
    short_message,
)
from rag_sources.kinds import registered_kinds
from rag_sources.relations import Incoming

# Characters `open` returns unless asked for fewer or more (a 5 MB one-line note
# would otherwise come back whole, whatever max_lines says).
DEFAULT_OPEN_CHARS = 40_000
MAX_OPEN_CHARS = 400_000
# Entries per list `neighbors` returns (a note may hold 100,000 links).
MAX_NEIGHBORS = 200


def _related(
    store: IndexStore, doc: dict[str, Any], incoming: list[Edge]
) -> tuple[dict[str, list[Any]], Callable[[str], bool]]:
    """The lists the document's kind adds to ``neighbors`` (its relations), and which
    incoming links they hold (those are not listed again as backlinks)."""
    info = registered_kinds().get(doc["kind"])
    relations = info.relations if info is not None else ()

    def read(where: str, columns: list[str]) -> list[dict[str, Any]]:
        return store.read("documents", where=where, columns=columns).to_pylist()

    links = [Incoming(e.origin.doc_id, e.origin.path) for e in incoming]
    related = {r.name: r.find(read, doc, links)[:MAX_NEIGHBORS] for r in relations}
    claims = [r.claims_link_from for r in relations if r.claims_link_from is not None]
    return related, lambda path: any(claim(path) for claim in claims)


class RaglineService:
    """The index as the MCP tools see it."""

    def __init__(self, config: RaglineConfig):
        self.config = config
        self._engine: SearchEngine | None = None
        self._engine_lock = threading.Lock()
        self._read_lock = threading.Lock()  # one reader at a time on the shared engine
        self._vocabularies = VisibleVocabularies()
        self._links = LinkGraphCache()
        self.reindexer = Reindexer(config)

    @property
    def engine(self) -> SearchEngine:
        """The warm engine (opened on first use; retried while there is no index yet)."""
        with self._engine_lock:
            if self._engine is None:
                self._engine = SearchEngine(self.config)
            return self._engine

    def warm(self) -> None:
        """Open the index and load the query embedder, so the first search is fast."""
        engine = self.engine
        engine.refresh()
        _ = engine.embedder.embed_query("warm up")

    # ---- tools ---------------------------------------------------------------

    def search(self, access: Access, request: SearchRequest) -> SearchOutput:
        engine = self.engine
        with self._read_lock:
            return run_search(engine, access, request, self._vocabularies)

    def locate(
        self,
        access: Access,
        *,
        id: str | None = None,
        source: str | None = None,
        path: str | None = None,
    ) -> Located:
        """The indexed document (and chunk) named by ``id`` or ``source`` + ``path``, as
        ``access`` may see it (for the tools in modules of their own)."""
        with self._read_lock:
            return self._locate(access, id, source, path)

    def _locate(self, access: Access, id: str | None, source: str | None, path: str | None) -> Any:
        """The indexed document (and chunk) a tool names, as this caller may see it;
        call with the read lock held."""
        engine = self.engine
        engine.refresh()
        return locate(
            engine.store, self._table(), access, self._configured(), id=id, source=source, path=path
        )

    def open(
        self,
        access: Access,
        *,
        id: str | None = None,
        source: str | None = None,
        path: str | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
        section: str | None = None,
        max_lines: int = 400,
        max_chars: int = DEFAULT_OPEN_CHARS,
        start_char: int = 0,
    ) -> OpenOutput:
        if section is not None and (start_line is not None or end_line is not None):
            raise RangeError(
                "give `section` or `start_line`/`end_line`, not both (a section is a range "
                "of its own)"
            )
        engine = self.engine
        with self._read_lock:
            found = self._locate(access, id, source, path)
            stale = engine.staleness([found.doc]).get(found.doc["doc_id"])
        doc, chunk = found.doc, found.chunk
        body = Body.of(doc["body"] or "", int(doc["body_start_line"] or 1), doc["sections_json"])
        chunk_range = (chunk["line_start"], chunk["line_end"], chunk["heading"]) if chunk else None
        symbol = None
        in_context = chunk_range is not None and (start_line, end_line, section) == (None,) * 3
        if in_context:
            table = self._table()
            symbol = symbol_range(engine.store, table, chunk) if table else None
        start, end, heading, anchor = body.choose_range(
            start_line, end_line, section, symbol or chunk_range
        )
        # A chunk opens in its context (its page, its whole function) when that fits the
        # caps; else as its own lines, so that the answer always holds it.
        if in_context and chunk_range and not body.fits(start, end, max_lines, max_chars):
            start, end = chunk_range[0], chunk_range[1]
            heading = heading if anchor else chunk_range[2] or None
        excerpt = body.cut(start, end, max_lines, heading, max_chars, start_char)
        frontmatter = json.loads(doc["frontmatter_json"] or "{}") or None
        return OpenOutput(
            doc_id=doc["doc_id"],
            chunk_id=chunk["chunk_id"] if chunk else None,
            source=doc["source"],
            kind=doc["kind"],
            path=doc["path"],
            title=doc["title"],
            aliases=list(doc["aliases"] or []),
            tags=list(doc["tags"] or []),
            section=excerpt.section,
            anchor=anchor,
            file_type=doc["file_type"],
            line_start=excerpt.line_start,
            line_end=excerpt.line_end,
            body_start_line=body.first_line,
            last_line=body.last_line,
            truncated=excerpt.truncated,
            text=excerpt.text,
            next_line=excerpt.next_line,
            next_char=excerpt.next_char,
            frontmatter=frontmatter if excerpt.line_start == body.first_line else None,
            modified=_iso(doc["modified"]),
            indexed_at=_iso(doc["indexed_at"]),
            stale=is_stale(stale),
            stale_reason=stale,
        )

    def neighbors(
        self,
        access: Access,
        *,
        id: str | None = None,
        source: str | None = None,
        path: str | None = None,
    ) -> NeighborsOutput:
        engine = self.engine
        with self._read_lock:
            found = self._locate(access, id, source, path)
            doc = found.doc
            graph = self._links.get(engine.store)
            chunk_id = found.chunk["chunk_id"] if found.chunk else None
            symbols = file_symbols(engine.store, self._table(), doc["doc_id"], chunk_id)
            incoming = [
                e for e in graph.incoming.get(doc["doc_id"], []) if access.can_see(e.origin.source)
            ]
            related, claimed = _related(engine.store, doc, incoming)
        note = graph.notes.get(doc["doc_id"]) or Note(
            doc["doc_id"], doc["source"], doc["path"], doc["title"]
        )
        outgoing = [_link_out(edge, access) for edge in graph.outgoing.get(note.doc_id, [])]
        backlinks = [
            BacklinkOut(
                source_note=_ref(edge.origin),
                heading=edge.link.heading,
                block=edge.link.block,
                alias=edge.link.alias,
                embed=edge.link.embed,
                line=edge.link.line,
            )
            for edge in sorted(incoming, key=lambda e: (e.origin.path, e.link.line))
            if not claimed(edge.origin.path)
        ]
        lists = {
            "links": [link for link in outgoing if not link.embed],
            "embeds": [link for link in outgoing if link.embed],
            "backlinks": backlinks,
            "symbols": symbols,
        }
        omitted = {name: len(items) - MAX_NEIGHBORS for name, items in lists.items()}
        return NeighborsOutput(
            note=_ref(note),
            **{name: items[:MAX_NEIGHBORS] for name, items in lists.items()},
            **related,
            omitted={name: count for name, count in omitted.items() if count > 0},
        )

    def list_sources(self, access: Access) -> ListSourcesOutput:
        report = index_status(self._visible_config(access), check_pending=False)
        return ListSourcesOutput(
            sources=[
                SourceInfo(**_source_fields(s, access))
                for s in report.sources
                if access.can_see(s.name)
            ]
        )

    def status(self, access: Access) -> StatusOutput:
        report = index_status(self._visible_config(access), check_pending=True)

        # Server paths are only shown to the local user.
        def shown(text: str) -> str:
            return self._shown(access, text)

        sources = []
        for s in report.sources:
            if not access.can_see(s.name):
                continue
            data = s.as_json()
            failure, pending_error = data["last_failure"], s.pending_error
            if failure:
                failure = {**failure, "message": shown(failure["message"])}
            listed = {
                severity: [
                    FileIssueOut(
                        path=i.path, severity=i.severity, message=shown(short_message(i.message))
                    )
                    for i in [i for i in s.issues if i.severity == severity][:MAX_LISTED_ISSUES]
                ]
                for severity in SEVERITIES
            }
            sources.append(
                SourceStatusOut(
                    **_source_fields(s, access),
                    last_run_id=s.last_run_id,
                    last_failure=failure,
                    pending_changes=data["pending_changes"],
                    pending_error=shown(pending_error) if pending_error else None,
                    problem_counts={severity: s.count(severity) for severity in SEVERITIES},
                    problem_groups=[
                        ProblemGroupOut(**{**g.as_json(), "message": shown(g.message)})
                        for g in s.issue_groups()[:MAX_ISSUE_GROUPS]
                    ],
                    errors=listed["error"],
                    skipped=listed["skipped"],
                    warnings=listed["warning"],
                    pending=listed["pending"],
                )
            )
        return StatusOutput(
            embedder=report.embedder, building_embedder=report.building, sources=sources
        )

    def reindex(self, access: Access, source: str, full: bool, wait_s: float) -> ReindexOutput:
        # Only configured sources can be indexed; an invisible one fails like an unknown one.
        check_source(source, access, [s.name for s in self.config.sources])
        outcome = self.reindexer.run(source, full, wait_s)
        counts = next(
            (s for s in index_status(self.config, check_pending=False).sources if s.name == source),
            None,
        )
        return ReindexOutput(
            source=outcome.source,
            via=outcome.via,
            run_id=outcome.run_id,
            status=outcome.status,
            success=outcome.success,
            seconds=round(outcome.seconds, 2),
            error=self._shown(access, outcome.error) if outcome.error else None,
            summary=self._shown(access, outcome.summary()),
            assets=outcome.assets,
            run_url=outcome.run_url,
            documents=counts.documents if counts else None,
            chunks=counts.chunks if counts else None,
        )

    # ---- helpers ---------------------------------------------------------------

    def _shown(self, access: Access, text: str) -> str:
        """``text`` as ``access`` may read it: server paths only for the local user."""
        if access.local:
            return text
        return redact_paths(
            text, [s.path for s in self.config.sources if s.path] + [self.config.data_dir]
        )

    def _table(self) -> str | None:
        generation = self.engine.generation
        return generation.table if generation else None

    def _configured(self) -> list[str]:
        return [s.name for s in self.config.sources]

    def _visible_config(self, access: Access) -> RaglineConfig:
        """The config with only the sources ``access`` may see (no scans of others)."""
        if access.sources is None:
            return self.config
        sources = [s for s in self.config.sources if access.can_see(s.name)]
        return self.config.model_copy(update={"sources": sources})


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _ref(note: Note) -> DocRef:
    return DocRef(doc_id=note.doc_id, source=note.source, path=note.path, title=note.title)


def _link_out(edge: Edge, access: Access) -> LinkOut:
    resolved = edge.resolved if edge.resolved and access.can_see(edge.resolved.source) else None
    return LinkOut(
        target=edge.link.target,
        heading=edge.link.heading,
        block=edge.link.block,
        alias=edge.link.alias,
        embed=edge.link.embed,
        line=edge.link.line,
        resolved=_ref(resolved) if resolved else None,
    )


def _source_fields(s: SourceStatus, access: Access) -> dict[str, Any]:
    return {
        "name": s.name,
        "kind": s.kind,
        "configured": s.configured,
        "path": s.path if access.local and s.path else None,
        "files": s.files,
        "documents": s.documents,
        "chunks": s.chunks,
        "last_indexed_at": _iso(s.last_indexed_at),
    }
