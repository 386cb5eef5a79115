"""The link graph of the indexed notes, resolved the way Obsidian resolves links.

A link target is matched, within the linking note's source, against (in order)
the path relative to the linking note's folder, the path from the source's root
(both without extension), a path suffix, the file name (case-insensitive; the
closest note wins when several share it) and the notes' aliases. Links never
resolve across sources, so a note's neighbours are always in its own source.

Bounded per document: its stored links are read only up to ``MAX_LINKS_JSON_CHARS``
(a longer list, or one that is not a flat JSON list, counts as no links) and at most
``MAX_LINKS_PER_DOCUMENT`` of them enter the graph, so one note of a million links
cannot hold a search or the `neighbors` tool.
"""

from __future__ import annotations

import json
import posixpath
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from rag_serving.index.store import IndexStore

_SUFFIXES = (".md", ".markdown")
MAX_LINKS_JSON_CHARS = 4_000_000  # of one document's stored links
MAX_LINKS_PER_DOCUMENT = 5_000


@dataclass(frozen=True)
class Note:
    doc_id: str
    source: str
    path: str
    title: str


@dataclass(frozen=True)
class Link:
    target: str
    heading: str | None
    block: str | None
    alias: str | None
    embed: bool
    line: int

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Link:
        return cls(
            target=str(raw.get("target") or ""),
            heading=raw.get("heading"),
            block=raw.get("block"),
            alias=raw.get("alias"),
            embed=bool(raw.get("embed")),
            line=int(raw.get("line") or 0),
        )


def _stem_key(path: str) -> str:
    lowered = path.lower()
    for suffix in _SUFFIXES:
        if lowered.endswith(suffix):
            return lowered[: -len(suffix)]
    return lowered


@dataclass
class SourceNotes:
    """Lookup tables for resolving link targets within one source."""

    by_path: dict[str, Note] = field(default_factory=dict)  # path without extension, lowercased
    by_name: dict[str, list[Note]] = field(default_factory=lambda: defaultdict(list))
    by_alias: dict[str, list[Note]] = field(default_factory=lambda: defaultdict(list))

    def add(self, note: Note, aliases: list[str]) -> None:
        key = _stem_key(note.path)
        self.by_path[key] = note
        self.by_name[posixpath.basename(key)].append(note)
        for alias in aliases:
            self.by_alias[alias.strip().lower()].append(note)

    def resolve(self, target: str, origin: Note) -> Note | None:
        """The note ``target`` points at from ``origin`` (None when unresolved)."""
        if not target.strip():
            return origin  # [[#Heading]]: a link within the note
        written = target.strip().replace("\\", "/")
        key = _stem_key(written.lstrip("/"))
        relative = posixpath.normpath(posixpath.join(posixpath.dirname(origin.path), written))
        if not written.startswith("/") and not relative.startswith(".."):
            found = self.by_path.get(_stem_key(relative))
            if found:
                return found
        if key in self.by_path:
            return self.by_path[key]
        if "/" in key:
            ends = [n for k, n in self.by_path.items() if k.endswith("/" + key)]
            if ends:
                return _closest(ends, origin)
        named = self.by_name.get(posixpath.basename(key))
        if named and "/" not in key:
            return _closest(named, origin)
        aliased = self.by_alias.get(written.lower())
        return _closest(aliased, origin) if aliased else None


def _closest(notes: list[Note], origin: Note) -> Note:
    """Prefer a note in the origin's folder, then the shortest path."""
    folder = posixpath.dirname(origin.path)
    return min(
        notes,
        key=lambda n: (posixpath.dirname(n.path) != folder, n.path.count("/"), n.path),
    )


@dataclass(frozen=True)
class Edge:
    origin: Note
    link: Link
    resolved: Note | None


@dataclass
class LinkGraph:
    """Every note's outgoing links, resolved, and the backlinks of every note."""

    notes: dict[str, Note] = field(default_factory=dict)
    outgoing: dict[str, list[Edge]] = field(default_factory=dict)
    incoming: dict[str, list[Edge]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def build(cls, rows: list[dict[str, Any]]) -> LinkGraph:
        graph = cls()
        per_source: dict[str, SourceNotes] = defaultdict(SourceNotes)
        for row in rows:
            note = Note(row["doc_id"], row["source"], row["path"], row["title"])
            graph.notes[note.doc_id] = note
            per_source[note.source].add(note, list(row["aliases"] or []))
        for row in rows:
            origin = graph.notes[row["doc_id"]]
            edges = []
            for raw in stored_links(row["links_json"]):
                link = Link.from_json(raw)
                edge = Edge(origin, link, per_source[origin.source].resolve(link.target, origin))
                edges.append(edge)
                if edge.resolved is not None and edge.resolved.doc_id != origin.doc_id:
                    graph.incoming[edge.resolved.doc_id].append(edge)
            graph.outgoing[origin.doc_id] = edges
        return graph


def stored_links(text: str | None) -> list[dict[str, Any]]:
    """A document's stored links, within the module's caps (none when over them or
    malformed)."""
    if not text or len(text) > MAX_LINKS_JSON_CHARS:
        return []
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return []
    if not isinstance(found, list):
        return []
    return [raw for raw in found[:MAX_LINKS_PER_DOCUMENT] if isinstance(raw, dict)]


class LinkGraphCache:
    """The graph of the current ``documents`` version (rebuilt when it changes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._graph: tuple[int, LinkGraph] | None = None

    def get(self, store: IndexStore) -> LinkGraph:
        version = store.documents().version if store.table_exists("documents") else -1
        with self._lock:
            if self._graph and self._graph[0] == version:
                return self._graph[1]
            rows = store.read(
                "documents", columns=["doc_id", "source", "path", "title", "aliases", "links_json"]
            ).to_pylist()
            graph = LinkGraph.build(rows)
            self._graph = (version, graph)
            return graph
