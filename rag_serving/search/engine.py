"""The one search facade shared by the CLI and the MCP server."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cache
from typing import Any, Literal

import numpy as np

from rag_serving.config import (
    CodeRankingConfig,
    EmbedderConfig,
    OllamaConfig,
    RaglineConfig,
    SentenceTransformersConfig,
)
from rag_serving.embedders import Embedder, create_embedder
from rag_serving.index.filters import (
    IndexVocabulary,
    SearchFilters,
    check_query,
    validate_filters,
)
from rag_serving.index.fingerprint import EmbedderFingerprint
from rag_serving.index.fulltext import Bm25Hit, FulltextIndex
from rag_serving.index.layout import IndexLayout, RemoteManifest
from rag_serving.index.links import LinkGraph
from rag_serving.index.manifest import (
    Generation,
    IndexManifest,
    manifest_version,
    read_manifest,
)
from rag_serving.index.store import IndexStore
from rag_serving.reading.context import HitContext, assemble_context
from rag_serving.search.code_ranking import (
    RolePriors,
    chunk_role,
    query_identifiers,
    role_shifts,
    spread,
    symbol_lines,
)
from rag_serving.search.collapse import best_per_document
from rag_serving.search.documents import with_document_scores
from rag_serving.search.feedback import FeedbackSettings, rescored_list
from rag_serving.search.fusion import (
    FusedHit,
    ListContribution,
    RankedList,
    convex_fusion,
    explain_as_dict,
    reciprocal_rank_fusion,
    single_list,
    zscore_fusion,
)
from rag_serving.search.links import LinkCounts, LinkLift, LinkPriorSettings, with_link_prior
from rag_serving.search.replica import FulltextReplica, prune_replicas
from rag_serving.search.rerank import Reranker, create_reranker
from rag_serving.search.rows import RowLocator
from rag_serving.search.vectors import InMemoryVectors
from rag_serving.search.weights import list_weights
from rag_serving.status import scanned_after
from rag_sources.errors import EmbedderMismatchError, FilterError, IndexNotBuiltError
from rag_sources.kinds import kind_history_types, kind_hit_details
from rag_sources.suggest import did_you_mean
from rag_sources.where import sql_in, sql_string

Mode = Literal["hybrid", "bm25", "vector"]
MODES: tuple[Mode, ...] = ("hybrid", "bm25", "vector")
SNIPPET_CHARS = 220
# With one hit per document, each list is read this many times k deep (at least):
# room for the further chunks of the documents kept.
COLLAPSE_DEPTH = 5
# A query of this many words or more is a question: its keyword list weighs its words
# in hybrid mode too (CISI hybrid 0.425 → 0.439; below it CoSQA's code questions lost).
LONG_QUESTION_WORDS = 10
# A query of fewer words looks for a place, not a document's subject: its chunks keep
# their own scores (known-item fragments in Arabic and Hindi lost up to 0.05 MRR@10
# to whole-document scores; docs/decisions.md, "keyword side").
DOCUMENT_QUERY_WORDS = 4
# Fused hits the link prior re-scores: a well-linked note from this deep can reach the
# top ten, and reading this many rows back costs ~0.1 ms on a warm engine.
LINK_POOL = 50
_LINK_COLUMNS = ["doc_id", "source", "path", "title", "aliases", "links_json", "file_type"]
# What the saved link counts were built by: a count file of another format is rebuilt.
LINK_COUNTS_FORMAT = 2
_HIT_COLUMNS = [
    "chunk_id", "doc_id", "source", "kind", "path", "title", "heading", "anchor",
    "line_start", "line_end", "text", "modified", "indexed_at", "facets",
]  # fmt: skip


UNCHECKED = "unchecked"


def is_stale(reason: str | None) -> bool:
    """Whether a hit's staleness reason means what is served is out of date."""
    return reason is not None and reason != UNCHECKED


@cache
def _detail_names() -> frozenset[str]:
    return frozenset(detail.name for detail in kind_hit_details())


@dataclass(frozen=True)
class SearchHit:
    """One chunk found by a search."""

    rank: int
    score: float
    source: str
    kind: str
    path: str  # relative to the source's root
    title: str
    anchor: str  # heading path, e.g. "Install > On Linux"
    snippet: str  # matched terms wrapped in ** **
    chunk_id: str
    doc_id: str
    line_start: int
    line_end: int
    modified: datetime | None
    indexed_at: datetime | None
    # "modified" / "deleted" since it was indexed; UNCHECKED: its source's folder is
    # not on this host, so nobody can tell (not stale)
    stale: str | None = None
    explain: dict[str, dict[str, float]] = field(default_factory=dict)
    location: str = ""  # the citeable place: "paper.pdf#page=6", "Note.md#Heading"
    file_type: str | None = None  # pdf, md, docx, python…, commit
    symbol: str | None = None  # a code chunk's function or class ("Client.retry")
    language: str | None = None  # a code chunk's language
    author: str | None = None  # a commit's or book's author, a feed entry's, a message's sender
    # What the hit's kind adds (rag_sources/hits.py): a message's `folder`, an entry's
    # `feed`; each is also read as an attribute (`hit.folder`).
    details: dict[str, str] = field(default_factory=dict)
    # The hit grown to its section within the search's context budget (``context``).
    context: HitContext | None = None
    # With one hit per document (``collapse``): how many more of its chunks matched
    # among the candidates read.
    more_sections: int = 0

    def __getattr__(self, name: str) -> Any:
        if name in _detail_names():
            return self.__dict__.get("details", {}).get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def as_json(self, with_explain: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "rank": self.rank,
            "score": round(self.score, 6),
            "source": self.source,
            "kind": self.kind,
            "path": self.path,
            "title": self.title,
            "anchor": self.anchor,
            "location": self.location,
            "file_type": self.file_type,
            "snippet": self.snippet,
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "lines": [self.line_start, self.line_end],
            "modified": self.modified.isoformat() if self.modified else None,
            "indexed_at": self.indexed_at.isoformat() if self.indexed_at else None,
            "stale": is_stale(self.stale),
            "stale_reason": self.stale,
        }
        for name in ("symbol", "language", "author"):
            if getattr(self, name):
                data[name] = getattr(self, name)
        data.update({name: value for name, value in self.details.items() if value})
        if self.more_sections:
            data["more_sections"] = self.more_sections
        if self.context is not None:
            data["context"] = self.context.as_json()
        if with_explain:
            data["explain"] = self.explain
        return data


@dataclass(frozen=True)
class SearchResult:
    query: str
    mode: Mode
    filters: SearchFilters
    hits: list[SearchHit]
    notice: str | None = None  # e.g. searching with the live vectors during a model switch
    # Milliseconds per stage: prepare (filters, index refresh), bm25, embed (the query
    # vector), vector (the LanceDB search), fuse, rerank (when asked: reading the top
    # hits' text and scoring them), rows (hits read back from LanceDB), snippets,
    # staleness; total.
    timings: dict[str, float] = field(default_factory=dict)

    def as_json(self, with_explain: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "query": self.query,
            "mode": self.mode,
            "hits": [hit.as_json(with_explain) for hit in self.hits],
        }
        if self.notice:
            data["notice"] = self.notice
        if with_explain:
            data["timings_ms"] = {k: round(v, 2) for k, v in self.timings.items()}
        return data


class StageTimer:
    """Wall time per named stage of one search, in milliseconds."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        begin = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - begin) * 1000

    def done(self) -> dict[str, float]:
        self.ms["total"] = (time.perf_counter() - self.started) * 1000
        return self.ms


class SearchEngine:
    """Opens the index once and answers searches; safe to keep warm.

    A long-lived engine sees what other processes write: LanceDB is opened with a
    read-consistency interval, Tantivy is reloaded per query, and a switch to a
    newly built generation (after an embedder change) is picked up from
    ``index.json`` without a restart. With the tables on object storage
    (``index_uri``) the engine keeps this host's own Tantivy index, built from the
    chunks table and caught up with its new versions (rag_serving/search/replica.py).
    """

    def __init__(self, config: RaglineConfig, read_consistency_s: float | None = 1.0):
        self.config = config
        self.layout = IndexLayout(config.data_dir, config.index_uri)
        self._lock = threading.RLock()
        self._embedding_thread: ThreadPoolExecutor | None = None
        self._vocabulary: tuple[int, IndexVocabulary] | None = None
        self._manifest_stamp: int | None = None
        self.generation: Generation | None = None
        self._embedder: Embedder | None = None
        self.notice: str | None = None  # why search does not use the configured embedder
        # From its second search on, an engine is a warm one: it keeps the vectors of a
        # table without a vector index in memory (rag_serving/search/vectors.py).
        self._searches = 0
        self._memory = InMemoryVectors(_HIT_COLUMNS)
        self._locator = RowLocator(_HIT_COLUMNS)
        self._tables: dict[str, tuple[int, dict[str, dict]]] = {}
        self._reranker: Reranker | None = None
        self._links: tuple[int, LinkCounts] | None = None  # per `documents` version
        # Table versions as last asked (~6 ms a question on a loaded machine): asked again
        # once read_consistency_s has passed, when LanceDB itself would look again.
        self._consistency_s = read_consistency_s
        self._versions: dict[str, tuple[int, float]] = {}
        self._fulltext_seen: tuple[FulltextIndex, float] | None = None  # and when
        self._replica: FulltextReplica | None = None
        self._manifest_checked = 0.0  # when the remote manifest's version was last asked
        if self.layout.remote:  # the manifest is a table: the store first
            self.store = IndexStore.of(config, read_consistency_s, read_only=True)
        self._open_manifest()
        if not self.layout.remote:
            self.store = IndexStore.of(config, read_consistency_s, read_only=True)

    def _open_manifest(self) -> None:
        stamp = self._manifest_version()
        manifest = read_manifest(self.layout.manifest_path)
        if manifest.active is None:
            where = self.config.index_uri if self.layout.remote else self.config.data_dir
            raise IndexNotBuiltError(f"no index at {where} yet; build it with `ragline index`")
        self._check_embedder(manifest)
        if self.generation is None or manifest.active.key != self.generation.key:
            self.generation = manifest.active
            self.fulltext = self._open_fulltext(manifest.active, manifest)
            self._embedder = None
        self.manifest = manifest
        self._manifest_stamp = stamp
        self._manifest_checked = time.monotonic()

    def _open_fulltext(self, generation: Generation, manifest: IndexManifest) -> FulltextIndex:
        """The generation's Tantivy index: the writers' own on a local index, this
        host's replica of the chunks table on a remote one."""
        if not self.layout.remote:
            return FulltextIndex(self.layout.fulltext_dir(generation.key))
        languages = {s.name: s.language for s in self.config.sources}
        folder = self.layout.search_fulltext_dir(generation.key)
        self._replica = FulltextReplica(self.store, folder, generation.table, languages)
        index = self._replica.open()
        # replicas of generations the manifest dropped: disk this host no longer needs
        kept = {g.key for g in (manifest.active, manifest.building) if g is not None}
        prune_replicas(folder.parent, kept | {generation.key})
        return index

    def _manifest_version(self) -> int | None:
        """A stamp that changes whenever the manifest does (None: there is none)."""
        path = self.layout.manifest_path
        try:
            if isinstance(path, RemoteManifest):
                return manifest_version(path)
            return path.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def refresh(self) -> None:
        """Pick up a new active generation written by another process (on object
        storage, asked at most once per read consistency interval)."""
        with self._lock:
            if self.layout.remote:
                now = time.monotonic()
                if self._consistency_s is None or now - self._manifest_checked < (
                    self._consistency_s
                ):
                    return
                self._manifest_checked = now
            stamp = self._manifest_version()
            if stamp is not None and stamp != self._manifest_stamp:
                self._open_manifest()

    def _check_embedder(self, manifest: IndexManifest) -> None:
        """Note (never refuse) a config whose embedder is not the live generation's:
        search answers from the live vectors, with the embedder they were made by,
        until a run has embedded every source with the configured one."""
        wanted = self.config.embedder
        model = "all-MiniLM-L6-v2" if wanted.model.endswith("all-MiniLM-L6-v2") else wanted.model
        assert manifest.active is not None
        live = manifest.active.fingerprint
        self.notice = None
        if (live.provider, live.model) == (wanted.provider, model):
            return
        building = manifest.building
        if building is not None and (
            (building.fingerprint.provider, building.fingerprint.model) == (wanted.provider, model)
        ):
            self.notice = (
                f"vectors for {wanted.provider}:{model} are being built; searching with the "
                f"live vectors of {live.describe()} until every source has them"
            )
            return
        self.notice = (
            f"the index holds vectors of {live.describe()} but the config asks for "
            f"{wanted.provider}:{model}; searching with {live.describe()} until "
            "`ragline index` has embedded every source with the new model"
        )

    def _version(self, name: str) -> int:
        """The version of table ``name`` (-1 when it does not exist), as LanceDB's read
        consistency interval sees it."""
        now = time.monotonic()
        cached = self._versions.get(name)
        if cached is not None and (
            self._consistency_s is None or now - cached[1] < self._consistency_s
        ):
            return cached[0]
        version = int(self.store.table(name).version) if self.store.table_exists(name) else -1
        self._versions[name] = (version, now)
        return version

    def _reload_fulltext(self) -> None:
        """See the full-text index's latest commit, looking at most once per read
        consistency interval, as LanceDB does for the tables (~0.07 ms a look)."""
        now = time.monotonic()
        seen = self._fulltext_seen
        recent = seen is not None and (
            self._consistency_s is None or now - seen[1] < self._consistency_s
        )
        if seen is not None and seen[0] is self.fulltext and recent:
            return
        if self._replica is not None and self.generation is not None:
            self._replica.catch_up(self._version(self.generation.table))
        self.fulltext.reload()
        self._fulltext_seen = (self.fulltext, now)

    @property
    def warm(self) -> bool:
        """From its second search on, an engine keeps what makes searches fast in
        memory (a one-shot `ragline search` would spend more loading it)."""
        return self._searches > 1

    def _embedding_of(self, query: str) -> Future[np.ndarray]:
        """The query's vector, computed on the engine's embedding thread."""
        with self._lock:
            if self._embedding_thread is None:
                self._embedding_thread = ThreadPoolExecutor(1, "ragline-query-embedding")
        return self._embedding_thread.submit(lambda: self.embedder.embed_query(query))

    @property
    def embedder(self) -> Embedder:
        """The query embedder of the active generation (which may lag the config
        while a new generation is being built)."""
        with self._lock:
            if self._embedder is None:
                assert self.generation is not None
                config = embedder_config_for(self.generation.fingerprint, self.config.embedder)
                self._embedder = create_embedder(config, self.config.data_dir)
                if self.layout.remote:
                    # A search host never indexes: build its ONNX encoder now, as
                    # indexing does, rather than inside its first search.
                    self._embedder.prepare_query_path()
            return self._embedder

    # ---- vocabulary for filter validation ----------------------------------

    def vocabulary(self) -> IndexVocabulary:
        """Sources, kinds and tags present in the index (plus configured sources)."""
        version = self._version("documents")
        if self._vocabulary and self._vocabulary[0] == version:
            return self._vocabulary[1]
        docs = self.store.read(
            "documents", columns=["source", "kind", "tags", "file_type", "facets"]
        ).to_pylist()
        vocabulary = IndexVocabulary.of_documents(
            docs, [(s.name, s.kind) for s in self.config.sources]
        )
        self._vocabulary = (version, vocabulary)
        return vocabulary

    # ---- search -------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int | None = None,
        filters: SearchFilters | None = None,
        mode: Mode | None = None,
        rerank: bool | None = None,
        context: int | None = None,
        collapse: bool | None = None,
    ) -> SearchResult:
        """Hybrid (or bm25 / vector) search; see ``hybrid_search``. With ``context``
        (characters), each hit is grown to its section within that budget in all;
        with ``collapse`` (``[search] collapse`` by default), one hit per document."""
        settings = self.config.search
        rerank = settings.rerank.enabled if rerank is None else rerank
        collapse = settings.collapse if collapse is None else collapse
        k = k or settings.k
        mode = mode or settings.mode
        if mode not in MODES:
            raise FilterError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        if k < 1:
            raise FilterError(f"k must be at least 1, got {k}")
        timer = StageTimer()
        self._searches += 1
        with timer.stage("prepare"):
            self.refresh()
            filters = validate_filters(filters or SearchFilters(), self.vocabulary())
            check_query(query)
            self._check_symbols(filters.symbols, filters.sources)
            self._reload_fulltext()
        # Fusion needs deep lists (measured: 200 candidates); one list needs only the
        # hits it returns, with a margin for rows LanceDB no longer holds.
        served = max(2 * k, settings.rerank.top_n if rerank else 0)
        if collapse:  # room for the further chunks of the documents kept
            served = max(served, COLLAPSE_DEPTH * k)
        # bm25 mode re-ranks its chunks by their documents' scores: as deep as fusion.
        depth = max(settings.candidates, k) if mode in ("hybrid", "bm25") else served
        assert self.generation is not None
        # The live generation's embedder embeds the query (it may lag the config).
        live = embedder_config_for(self.generation.fingerprint, self.config.embedder)
        bm25_weight, vector_weight = list_weights(query, settings.weights, live.multilingual)
        lists: list[RankedList] = []
        bm25: list[Bm25Hit] = []
        document_bm25: dict[str, float] | None = None  # by doc key, where documents scored
        # The query is embedded (ONNX Runtime, outside the GIL) while Tantivy searches.
        vectors = mode == "hybrid" and self.store.table_exists(self.generation.table)
        embedding = self._embedding_of(query) if vectors else None
        if mode in ("hybrid", "bm25"):
            with timer.stage("bm25"):
                bm25, ranked, scores, document_bm25 = self._keyword_hits(
                    query, filters, depth, mode
                )
            lists.append(
                RankedList(
                    "bm25",
                    ranked,
                    scores,
                    bm25_weight,
                    floor=0.0,
                    # No more unmatched chunks than the index holds.
                    depth=min(depth, self.fulltext.num_docs()),
                )
            )
        feedback = mode == "hybrid" and settings.feedback.enabled and settings.feedback.weight > 0
        if mode in ("hybrid", "vector"):
            found = self._vector_search(
                query, filters, depth, timer, with_vectors=feedback, embedding=embedding
            )
            lists.append(RankedList("vector", found.ids, found.sims, vector_weight))
            if feedback and len(lists) == 2:
                with timer.stage("feedback"):
                    lists = self._with_feedback(lists, found)
        code = settings.code
        by_role = (code.intent or code.tests_below) and bool(self.vocabulary().languages)
        prior = mode == "hybrid" and settings.links.enabled
        pool = max(served, code.window if by_role else 0, LINK_POOL if prior else 0)
        with timer.stage("fuse"):
            fused = self._fuse(lists, pool) if mode == "hybrid" else single_list(lists[0])
        lifts: dict[str, LinkLift] = {}
        if prior and fused:
            with timer.stage("links"):
                fused, lifts = self._with_link_prior(fused)
        if by_role and fused:
            with timer.stage("roles"):
                fused = self._by_role(query, fused, code)
        if mode in ("hybrid", "bm25"):
            fused = fused[:served]
        reranked: dict[str, dict[str, float]] = {}
        if rerank and fused and self.store.table_exists(self.generation.table):
            with timer.stage("rerank"):
                fused, reranked = self._rerank(query, fused)
        found = {h.chunk_id: h for h in bm25}
        hits = self._materialize(query, fused, k, timer, found, filters.symbols, collapse)
        for i, hit in enumerate(hits):
            if document_bm25 is not None and hit.chunk_id in found and "bm25" in hit.explain:
                own = found[hit.chunk_id]
                hit = replace(hit, explain=_with_bm25_parts(hit.explain, own, document_bm25))
            if hit.chunk_id in lifts:
                hit = replace(hit, explain={**hit.explain, "links": lifts[hit.chunk_id].as_dict()})
            if hit.chunk_id in reranked:
                hit = replace(hit, explain={**hit.explain, "rerank": reranked[hit.chunk_id]})
            hits[i] = hit
        if context:
            with timer.stage("context"):
                grown = assemble_context(self.store, self.generation.table, hits, context)
                hits = [replace(hit, context=grown.get(hit.chunk_id)) for hit in hits]
        return SearchResult(query, mode, filters, hits, self.notice, timer.done())

    def _keyword_hits(
        self, query: str, filters: SearchFilters, depth: int, mode: Mode
    ) -> tuple[list[Bm25Hit], list[str], list[float], dict[str, float] | None]:
        """The keyword list (its hits, and their chunk ids and scores in its order):
        chunks by BM25, re-scored by their documents' BM25 as
        whole texts when the query has several words (rag_serving/search/documents.py).
        bm25 mode and long questions weigh the query's words (stop words low, repeats
        counted): in the fusion that lost on short queries (docs/decisions.md,
        "keyword side"). Last, the documents' BM25 by doc key where they were scored
        (None: the chunks' own scores stand), for ``--explain``."""
        weigh = mode == "bm25" or len(query.split()) >= LONG_QUESTION_WORDS
        hits = self.fulltext.search(query, filters, depth, weigh_words=weigh)
        if len(query.split()) < DOCUMENT_QUERY_WORDS:
            return hits, [hit.chunk_id for hit in hits], [hit.score for hit in hits], None
        documents = self.fulltext.document_scores(
            query, [hit.doc_key for hit in hits], weigh_words=weigh
        )
        return hits, *with_document_scores(hits, documents), documents

    @property
    def reranker(self) -> Reranker:
        """The configured reranker, created (and its model loaded) on first use."""
        with self._lock:
            if self._reranker is None:
                self._reranker = create_reranker(self.config.search.rerank)
            return self._reranker

    def _rerank(
        self, query: str, fused: list[FusedHit]
    ) -> tuple[list[FusedHit], dict[str, dict[str, float]]]:
        """The top ``top_n`` hits re-scored by the reranker and put in its order (ties
        keep the fused order), the rest after them as they were; per reranked id, its
        reranker score, rank before reranking and fused score."""
        top_n = self.config.search.rerank.top_n
        rows = self._hit_rows([hit.id for hit in fused[:top_n]])
        head = [(rank, hit) for rank, hit in enumerate(fused[:top_n], 1) if hit.id in rows]
        scores = self.reranker.score(query, [rerank_text(rows[hit.id]) for _, hit in head])
        order = sorted(range(len(head)), key=lambda i: (-scores[i], head[i][0]))
        explain = {
            hit.id: {"score": scores[i], "rank_before": rank, "fused_score": hit.score}
            for i, (rank, hit) in enumerate(head)
        }
        reordered = [FusedHit(head[i][1].id, scores[i], head[i][1].explain) for i in order]
        return reordered + fused[top_n:], explain

    def _by_role(
        self, query: str, fused: list[FusedHit], code: CodeRankingConfig
    ) -> list[FusedHit]:
        """The best ``code.window`` hits moved by what the query asks for (code or
        history) and tests below code (rag_serving/search/code_ranking.py), each move
        in spreads of their scores; the rest after them as they were."""
        head = fused[: code.window]
        rows = self._hit_rows([hit.id for hit in head])
        roles = [
            chunk_role(rows[hit.id]["path"], rows[hit.id].get("facets"))
            if hit.id in rows
            else "other"
            for hit in head
        ]
        names = query_identifiers(query)
        defines = [
            bool(names)
            and hit.id in rows
            and matched_symbol(rows[hit.id].get("facets"), names) is not None
            for hit in head
        ]
        priors = RolePriors(code.prefer, code.tests)
        shifts = role_shifts(query, roles, defines, priors, code.intent, code.tests_below)
        if not any(shifts):
            return fused
        unit = spread([hit.score for hit in head])
        moved = []
        for hit, shift in zip(head, shifts, strict=True):
            if shift:
                role = ListContribution(0, shift, shift * unit)
                hit = FusedHit(hit.id, hit.score + shift * unit, {**hit.explain, "role": role})
            moved.append(hit)
        order = sorted(range(len(moved)), key=lambda i: (-moved[i].score, i))
        return [moved[i] for i in order] + fused[code.window :]

    def link_counts(self) -> LinkCounts:
        """Backlink counts and outgoing links of every document, built from the
        ``documents`` table once per version of it, and kept in a file for the next
        process to read."""
        version = self._version("documents")
        with self._lock:
            if self._links is not None and self._links[0] == version:
                return self._links[1]
            path = self.layout.link_counts_path
            # a table dropped and made again starts its versions over: its rows too
            key = {"format": LINK_COUNTS_FORMAT,
                   "index": self.config.index_uri or str(self.config.data_dir),
                   "documents": version, "rows": self.store.count("documents")}  # fmt: skip
            counts = LinkCounts.load(path, key)
            if counts is None:
                rows = (
                    self.store.read("documents", columns=_LINK_COLUMNS).to_pylist()
                    if version >= 0
                    else []
                )
                # A record of changes (a commit) links to the files it changed: that
                # says nothing of which of them answers a question.
                history = set(kind_history_types())
                rows = [r for r in rows if r["file_type"] not in history]
                counts = LinkCounts.of_graph(LinkGraph.build(rows))
                counts.save(path, key)
            self._links = (version, counts)
            return counts

    def _with_link_prior(self, fused: list[FusedHit]) -> tuple[list[FusedHit], dict[str, LinkLift]]:
        """``fused`` re-scored by the link prior (rag_serving/search/links.py); a no-op,
        reading nothing, in an index without links."""
        counts = self.link_counts()
        if not counts:
            return fused, {}
        doc_of = self._doc_ids([hit.id for hit in fused])
        configured = self.config.search.links
        settings = LinkPriorSettings(configured.backlinks, configured.linked, configured.top)
        return with_link_prior(fused, doc_of, counts, settings)

    def _doc_ids(self, chunk_ids: list[str]) -> dict[str, str]:
        """Each chunk's document id: from the in-memory copy on a warm engine, else
        from the chunks' rows."""
        assert self.generation is not None
        if self.warm:
            with self._lock:
                version = self._version(self.generation.table)
                found = self._memory.column(chunk_ids, version, "doc_id")
            if found is not None:
                return found
        rows = self._hit_rows(chunk_ids)
        return {chunk_id: row["doc_id"] for chunk_id, row in rows.items()}

    def _check_symbols(self, symbols: tuple[str, ...], sources: tuple[str, ...]) -> None:
        """Fail, with close matches, on a symbol no served chunk of ``sources`` (all
        sources when empty) has: a symbol only a source outside them defines is
        unknown, and never suggested."""
        assert self.generation is not None
        table = self.generation.table
        if not symbols or not self.store.table_exists(table):
            return
        scope = f" AND {sql_in('source', sources)}" if sources else ""
        for symbol in symbols:
            where = f"array_has(facets, {sql_string('symbol:' + symbol)}){scope}"
            if self.store.count(table, where) == 0:
                known = {
                    facet[len("symbol:") :]
                    for row in self.store.read(
                        table, where=f"array_length(facets) > 1{scope}", columns=["facets"]
                    )
                    .column("facets")
                    .to_pylist()
                    for facet in row or ()
                    if facet.startswith("symbol:")
                }
                raise FilterError(
                    f"no indexed code defines symbol {symbol!r}{did_you_mean(symbol, known)} "
                    "(give a function, method or class name, e.g. 'retry' or 'Client.retry')"
                )

    def _fuse(self, lists: list[RankedList], limit: int) -> list[FusedHit]:
        settings = self.config.search
        if settings.fusion == "zscore":
            return zscore_fusion(lists, limit)
        if settings.fusion == "convex":
            return convex_fusion(lists, limit)
        return reciprocal_rank_fusion(lists, k=settings.rrf_k, limit=limit)

    def _vector_search(
        self,
        query: str,
        filters: SearchFilters,
        depth: int,
        timer: StageTimer | None = None,
        with_vectors: bool = False,
        embedding: Future[np.ndarray] | None = None,
    ) -> VectorHits:
        """The top ``depth`` chunks by cosine; ``with_vectors``: their unit vectors too.
        ``embedding``: the query's vector, being computed already."""
        assert self.generation is not None
        timer = timer or StageTimer()
        if not self.store.table_exists(self.generation.table):
            return VectorHits([], [], None, None)
        with timer.stage("embed"):
            embedded = embedding.result() if embedding else self.embedder.embed_query(query)
            vector = np.asarray(embedded, dtype=np.float32)
        expected = self.generation.fingerprint.dimension
        if vector.shape != (expected,):
            raise EmbedderMismatchError(
                f"the query embedder gives {vector.shape[-1]}-dimensional vectors but the "
                f"index holds {expected}; run `ragline index --full`"
            )
        with timer.stage("vector"):
            chunks = self.store.chunks(self.generation.table)
            if self.warm and _in_memory_filters(filters):
                with self._lock:
                    table, version = self.generation.table, self._version(self.generation.table)
                    if self._memory.usable(chunks, table, version):
                        ids, sims = self._memory.search(
                            vector, depth, filters.sources, filters.kinds
                        )
                        held = self._memory.vectors(ids) if with_vectors else None
                        return VectorHits(ids, sims, vector, held)
            search = chunks.search(vector).distance_type("cosine")
            where = filters.to_sql()
            if where:
                search = search.where(where, prefilter=True)
            search = self._with_index_params(search, chunks, filtered=bool(where))
            columns = ["chunk_id", "_distance", *(["vector"] if with_vectors else [])]
            found = search.select(columns).limit(depth).to_arrow()
        ids = found.column("chunk_id").to_pylist()
        sims = [1.0 - float(d) for d in found.column("_distance").to_pylist()]
        vectors = _unit_rows(found.column("vector"), expected) if with_vectors else None
        return VectorHits(ids, sims, vector, vectors)

    def _with_feedback(self, lists: list[RankedList], hits: VectorHits) -> list[RankedList]:
        """The vector list re-scored with the query moved toward the best fused hits
        (rag_serving/search/feedback.py), beside the other lists."""
        configured = self.config.search.feedback
        if hits.query is None or hits.vectors is None or len(hits.vectors) != len(hits.ids):
            return lists
        settings = FeedbackSettings(configured.top, configured.weight, configured.temperature)
        first = self._fuse(lists, settings.top)
        rescored = rescored_list(lists[-1], hits.vectors, first, hits.query, settings)
        return lists if rescored is None else [*lists[:-1], rescored]

    @staticmethod
    def _with_index_params(search: Any, chunks: Any, filtered: bool) -> Any:
        """Search parameters for the table's vector index, if it has one: probe enough
        partitions and re-rank with the full vectors, so recall@10 stays ≥ 0.95 and
        distances are exact; with a filter, probe further partitions while too few
        rows pass it. Rows not yet in the index are scanned exactly by LanceDB."""
        from rag_serving.index.ann import REFINE_FACTOR, find_vector_index

        index = find_vector_index(chunks)
        if index is None:
            return search
        search = search.nprobes(index.nprobes).refine_factor(REFINE_FACTOR)
        return search.maximum_nprobes(0) if filtered else search

    def _materialize(
        self,
        query: str,
        fused: list[FusedHit],
        k: int,
        timer: StageTimer | None = None,
        found: dict[str, Bm25Hit] | None = None,
        symbols: tuple[str, ...] = (),
        collapse: bool = False,
    ) -> list[SearchHit]:
        """Fetch the chunks' rows from LanceDB, the source of truth (a chunk the
        full-text index still holds but LanceDB no longer does is dropped); ``found``
        are the query's BM25 hits, whose stored rows give their snippets; ``symbols``
        those the search was filtered on (a hit names the one it defines); with
        ``collapse``, the best chunk of each document only."""
        assert self.generation is not None
        timer = timer or StageTimer()
        if not fused or not self.store.table_exists(self.generation.table):
            return []
        more: dict[str, int] = {}
        with timer.stage("rows"):
            if collapse:
                collapsed = best_per_document(fused, self._hit_rows, k)
                rows, kept, more = collapsed.rows, collapsed.hits, collapsed.more
            else:
                wanted = [hit.id for hit in fused[: k * 2]]
                rows = self._hit_rows(wanted, limit=k)
                kept = [hit for hit in fused if hit.id in rows][:k]
        with timer.stage("snippets"):
            ids = [hit.id for hit in kept]
            highlights = self.fulltext.highlights(query, ids, SNIPPET_CHARS, found)
        with timer.stage("staleness"):
            staleness = self.staleness([rows[hit.id] for hit in kept])
        hits = []
        details = kind_hit_details()  # once per search, not once per hit
        narrow = self.config.search.code.symbol_lines
        for rank, hit in enumerate(kept, start=1):
            row = rows[hit.id]
            facets = facet_values(row.get("facets"))
            marked = highlights.get(hit.id)
            snippet = marked.marked() if marked else _head(row["text"])
            symbol = matched_symbol(row.get("facets"), symbols)
            lines, anchor = (row["line_start"], row["line_end"]), row["anchor"]
            defined = symbol_names(row.get("facets"))
            # a chunk of one definition is that definition's lines already
            several = len({name.rsplit(".", 1)[-1] for name in defined}) > 1
            own = symbol_lines(
                query, row["text"], facets.get("language"), row["line_start"], defined, symbol
            ) if narrow and several else None  # fmt: skip
            if own is not None:
                symbol, lines = own.name, (own.line_start, own.line_end)
                anchor = f"L{own.line_start}-L{own.line_end}"
            hits.append(
                SearchHit(
                    rank=rank,
                    score=hit.score,
                    source=row["source"],
                    kind=row["kind"],
                    path=row["path"],
                    title=row["title"],
                    anchor=row["heading"] or "",
                    snippet=snippet,
                    chunk_id=row["chunk_id"],
                    doc_id=row["doc_id"],
                    line_start=lines[0],
                    line_end=lines[1],
                    modified=row["modified"],
                    indexed_at=row["indexed_at"],
                    stale=staleness.get(row["doc_id"]),
                    explain=explain_as_dict(hit.explain),
                    location=hit_location(row["path"], anchor),
                    file_type=facets.get("type"),
                    symbol=symbol or facets.get("symbol"),
                    language=facets.get("language"),
                    author=facets.get("author_name"),
                    details={d.name: facets[d.facet] for d in details if facets.get(d.facet)},
                    more_sections=more.get(hit.id, 0),
                )
            )
        return hits

    def _hit_rows(
        self, chunk_ids: list[str], limit: int | None = None
    ) -> dict[str, dict[str, Any]]:
        """The served rows of ``chunk_ids`` (at least the first ``limit`` served):
        warm, from the in-memory copy when it holds the table's current version
        (~0.1 ms) or by offset (~4 ms at 100k chunks); else by a filtered read (a
        scan below the BTREE threshold, ~4-20 ms)."""
        assert self.generation is not None
        if self.warm:
            table = self.generation.table
            with self._lock:
                version = self._version(table)
                chunks = self.store.chunks(table)
                self._memory.usable(chunks, table, version)  # loads what fits, once
                rows = self._memory.rows(chunk_ids, version, limit)
                if rows is None:  # not held (too large, or reloading): by offset
                    rows = self._locator.rows(chunks, table, version, chunk_ids, limit)
            if rows is not None:
                return rows
        table = self.store.read(
            self.generation.table, where=sql_in("chunk_id", chunk_ids), columns=_HIT_COLUMNS
        )
        return {row["chunk_id"]: row for row in table.to_pylist()}

    def _small_table(self, name: str, key: str, columns: list[str]) -> dict[str, dict]:
        """All rows of table ``name`` by ``key``, kept per table version (a warm
        engine's staleness check reads them without a query)."""
        if not self.store.table_exists(name):
            return {}
        version = self._version(name)
        cached = self._tables.get(name)
        if cached is None or cached[0] != version:
            rows = self.store.read(name, columns=columns).to_pylist()
            cached = (version, {row[key]: row for row in rows})
            self._tables[name] = cached
        return cached[1]

    def staleness(self, rows: list[dict[str, Any]]) -> dict[str, str | None]:
        """Per document: "modified" or "deleted" when what search serves is not the
        item as it is now — changed or gone on disk (one stat per document), or
        rescanned or removed by a run that has not completed — else None."""
        doc_ids = list({row["doc_id"] for row in rows})
        sources = list({row["source"] for row in rows})
        file_columns = ["doc_id", "size", "mtime_ns", "seen_at"]
        state_columns = ["source", "last_indexed_at"]
        if self.warm:  # whole tables per version, no query per search
            files = self._small_table("files", "doc_id", file_columns)
            recorded = {d: files[d] for d in doc_ids if d in files}
            states = self._small_table("source_state", "source", state_columns)
            served_at = {s: states[s]["last_indexed_at"] for s in sources if s in states}
        else:
            recorded = {
                r["doc_id"]: r
                for r in self.store.read(
                    "files", where=sql_in("doc_id", doc_ids), columns=file_columns
                ).to_pylist()
            }
            served_at = {
                r["source"]: r["last_indexed_at"]
                for r in self.store.read(
                    "source_state", where=sql_in("source", sources), columns=state_columns
                ).to_pylist()
            }
        roots = {s.name: str(s.path) if s.path else None for s in self.config.sources}
        # A source whose folder is not here (a search host without the files, an
        # unmounted disk) cannot be checked: its hits say so, not "deleted".
        absent = {name for name in sources if roots.get(name) and not os.path.exists(roots[name])}
        out: dict[str, str | None] = {}
        for row in rows:
            if row["source"] in absent and recorded.get(row["doc_id"], {}).get("mtime_ns"):
                out[row["doc_id"]] = UNCHECKED
                continue
            out[row["doc_id"]] = self._stale(row, roots, recorded, served_at)
        return out

    @staticmethod
    def _stale(
        row: dict[str, Any],
        roots: dict[str, str | None],
        recorded: dict[str, dict[str, Any]],
        served_at: dict[str, Any],
    ) -> str | None:
        if row["source"] not in roots:
            return None  # a source no longer configured: nothing to compare with
        root = roots[row["source"]]
        seen = recorded.get(row["doc_id"])
        if seen is None:
            return "deleted"  # a scan dropped it; the run that would unserve it did not finish
        if row["source"] in served_at and scanned_after(seen["seen_at"], served_at[row["source"]]):
            return "modified"
        # Only items that are files (with a recorded mtime) can be checked by a stat;
        # a message inside an mbox or a feed entry cannot.
        if seen["mtime_ns"] is None or root is None:
            return None
        try:  # os, not pathlib: ~4× faster, and this runs per hit
            st = os.stat(os.path.join(root, row["path"]))
        except FileNotFoundError:
            return "deleted"
        except OSError:
            return None
        changed = (st.st_size, st.st_mtime_ns) != (seen["size"], seen["mtime_ns"])
        return "modified" if changed else None


@dataclass(frozen=True)
class VectorHits:
    """A vector search's ids and cosines, best first, with the query vector and (when
    asked for) the hits' unit vectors, rows in the order of ``ids``."""

    ids: list[str]
    sims: list[float]
    query: np.ndarray | None
    vectors: np.ndarray | None


def _unit_rows(column: Any, dimension: int) -> np.ndarray:
    flat = column.combine_chunks().values.to_numpy(zero_copy_only=False)
    rows = np.asarray(flat, dtype=np.float32).reshape(-1, dimension)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1.0, norms)


def embedder_config_for(
    fingerprint: EmbedderFingerprint, configured: EmbedderConfig
) -> EmbedderConfig:
    """Settings to embed queries for ``fingerprint``: the configured ones when they
    match, else that provider's settings for the recorded model (mid-switch)."""
    model = (
        "all-MiniLM-L6-v2" if configured.model.endswith("all-MiniLM-L6-v2") else configured.model
    )
    prefixes = {"document_prefix": fingerprint.document_prefix,
                "query_prefix": fingerprint.query_prefix}  # fmt: skip
    recorded = fingerprint.document_prefix or fingerprint.query_prefix
    if (configured.provider, model) == (fingerprint.provider, fingerprint.model):
        if not isinstance(configured, OllamaConfig) or not recorded:
            return configured  # (an index made before prefixes were recorded: as configured)
        return configured.model_copy(update=prefixes)  # the prefixes its vectors had
    if fingerprint.provider == "ollama":
        if isinstance(configured, OllamaConfig):
            return configured.model_copy(update={"model": fingerprint.model, **prefixes})
        return OllamaConfig(provider="ollama", model=fingerprint.model, **prefixes)
    return SentenceTransformersConfig(model=fingerprint.model)


def _in_memory_filters(filters: SearchFilters) -> bool:
    """Whether the in-memory vectors can apply ``filters`` (sources and kinds only)."""
    from dataclasses import replace

    return replace(filters, sources=(), kinds=()) == SearchFilters()


def hit_location(path: str, anchor: str | None) -> str:
    """Where a hit is, as a person cites it: ``paper.pdf#page=6``, ``Note.md#Heading``."""
    return f"{path}#{anchor}" if anchor else path


def facet_values(facets: list[str] | None) -> dict[str, str]:
    """Each facet's first value by name (``type:pdf`` → ``{"type": "pdf"}``)."""
    out: dict[str, str] = {}
    for facet in facets or ():
        name, colon, value = facet.partition(":")
        if colon:
            out.setdefault(name, value)
    return out


def symbol_names(facets: list[str] | None) -> list[str]:
    """The names of the symbols a chunk defines, qualified first."""
    return [f[len("symbol:") :] for f in facets or () if f.startswith("symbol:")]


def matched_symbol(facets: list[str] | None, wanted: tuple[str, ...]) -> str | None:
    """The qualified name of the first symbol a chunk defines that is one of ``wanted``
    (short or qualified): a class chunk holding the method ``retry`` asked for names
    ``Client.retry``, not ``Client``. None when nothing is wanted or matches."""
    if not wanted:
        return None
    # A definition's facets are its qualified name, then its short one when it differs.
    names = [f[len("symbol:") :] for f in facets or () if f.startswith("symbol:")]
    for name in names:
        if any(name == w or name.endswith("." + w) for w in wanted):
            return name
    return None


def rerank_text(row: dict[str, Any]) -> str:
    """What the reranker reads of a hit: its title and heading path, then its text."""
    context = " > ".join(part for part in (row.get("title"), row.get("heading")) if part)
    return f"{context}\n{row['text']}" if context else str(row["text"])


def _head(text: str, limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rsplit(" ", 1)[0] + "…"


def hybrid_search(
    config: RaglineConfig,
    query: str,
    k: int | None = None,
    filters: SearchFilters | None = None,
    mode: Mode | None = None,
    rerank: bool | None = None,
    context: int | None = None,
    collapse: bool | None = None,
) -> SearchResult:
    """Search the index of ``config``: vector (LanceDB) and BM25 (Tantivy), both
    prefiltered, fused (``search.fusion``), then, with ``rerank`` (default
    ``search.rerank.enabled``), the top ``search.rerank.top_n`` re-scored by the
    reranker, then (``collapse``, default ``search.collapse``) one hit per document.
    Opens the index for this one call; keep a ``SearchEngine`` for repeated
    searches."""
    return SearchEngine(config).search(
        query, k=k, filters=filters, mode=mode, rerank=rerank, context=context,
        collapse=collapse,
    )  # fmt: skip


def _with_bm25_parts(
    explain: dict[str, dict[str, float]], own: Bm25Hit, documents: dict[str, float]
) -> dict[str, dict[str, float]]:
    """A served hit's explain with what its mixed keyword score is made of: its chunk's
    own BM25 (``own``) and its document's (absent where the document has no row)."""
    parts = {"chunk_bm25": own.score}
    if own.doc_key in documents:
        parts["document_bm25"] = documents[own.doc_key]
    return {**explain, "bm25": {**explain["bm25"], **parts}}
