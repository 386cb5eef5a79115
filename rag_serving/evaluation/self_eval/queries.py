"""A self-evaluation query, the set, and the corpus and vocabulary it is built from."""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore
from rag_sources.errors import RaglineError
from rag_sources.where import sql_in

if TYPE_CHECKING:
    from rag_serving.config import RaglineConfig

from rag_serving.evaluation.self_eval.params import SET_FORMAT
from rag_serving.evaluation.self_eval.words import readable, terms


@dataclass(frozen=True)
class SelfQuery:
    """One known-item query and where its answer is."""

    id: str
    type: str  # link | heading | fragment
    split: str  # heldout | tuning
    source: str
    query: str
    doc_id: str  # the document that answers it
    path: str
    heading: str | None = None  # heading: the heading's text (its section is found by it)
    origin: str | None = None  # link: the linking note, left out of the ranking

    @classmethod
    def make(
        cls,
        type_: str,
        source: str,
        query: str,
        doc_id: str,
        path: str,
        heading: str | None = None,
        origin: str | None = None,
    ) -> SelfQuery:
        digest = _hash(type_, source, query, doc_id, heading or "", origin or "")
        split = "heldout" if int(digest[:8], 16) % 2 == 0 else "tuning"
        return cls(digest[:16], type_, split, source, query, doc_id, path, heading, origin)

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class QuerySet:
    queries: list[SelfQuery]
    sources: list[str]
    created: str
    index: dict[str, Any]
    candidates: dict[str, int] = field(default_factory=dict)  # per type, before the cap

    @property
    def set_id(self) -> str:
        # By the queries alone: a rebuilt set that came out the same compares with
        # the runs before it.
        return _hash(*sorted(q.id for q in self.queries))[:16]

    def as_json(self) -> dict[str, Any]:
        return {
            "format": SET_FORMAT,
            "created": self.created,
            "sources": self.sources,
            "index": self.index,
            "candidates": self.candidates,
            "queries": [q.as_json() for q in self.queries],
        }


def _hash(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class Corpus:
    """What the query builders read from the index: documents and served chunks."""

    documents: list[dict[str, Any]]
    chunks: list[dict[str, Any]]
    generation: dict[str, Any]


def read_corpus(config: RaglineConfig, sources: Sequence[str]) -> Corpus:
    """The documents and live chunks of ``sources``."""
    layout = IndexLayout(config.data_dir, config.index_uri)
    manifest = read_manifest(layout.manifest_path)
    if manifest.active is None:
        raise RaglineError(f"no index at {config.data_dir} yet; build it with `ragline index`")
    store = IndexStore.of(config, read_only=True)
    where = sql_in("source", sources)
    documents = store.read(
        "documents",
        where=where,
        columns=["doc_id", "source", "path", "title", "aliases", "links_json", "body"],
    ).to_pylist()
    table = manifest.active.table
    chunks = (
        store.read(
            table,
            where=where,
            columns=[
                "doc_id",
                "source",
                "path",
                "title",
                "heading",
                "line_start",
                "line_end",
                "text",
            ],
        ).to_pylist()
        if store.table_exists(table)
        else []
    )
    generation = {"key": manifest.active.key, "embedder": manifest.active.fingerprint.as_dict()}
    return Corpus(documents, chunks, generation)


class Vocabulary:
    """Document frequencies of terms, and which documents hold the rare ones."""

    RARE = 20  # a term in at most this many documents can single one out

    def __init__(self, corpus: Corpus) -> None:
        per_doc: dict[str, set[str]] = defaultdict(set)
        for chunk in corpus.chunks:
            per_doc[chunk["doc_id"]].update(terms(readable(chunk["text"] or "")))
        self.documents = max(1, len(per_doc))
        self.frequency: Counter[str] = Counter()
        for found in per_doc.values():
            self.frequency.update(found)
        self.postings: dict[str, set[str]] = defaultdict(set)
        for doc_id, found in per_doc.items():
            for term in found:
                if self.frequency[term] <= self.RARE:
                    self.postings[term].add(doc_id)

    def mean_idf(self, found: Iterable[str]) -> float:
        idf = [math.log((self.documents + 1) / self.frequency.get(t, 1)) for t in found]
        return sum(idf) / len(idf) if idf else 0.0

    def only_in(self, found: Iterable[str]) -> str | None:
        """The one document that holds every rare term of ``found`` (None: none or
        several, or no rare term)."""
        holders: set[str] | None = None
        for term in sorted(found, key=lambda t: self.frequency.get(t, 0)):
            if self.frequency.get(term, 0) > self.RARE:
                break
            postings = self.postings.get(term, set())
            holders = set(postings) if holders is None else holders & postings
            if len(holders) <= 1:
                break
        return next(iter(holders)) if holders is not None and len(holders) == 1 else None
