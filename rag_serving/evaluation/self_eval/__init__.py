"""``ragline eval --self``: retrieval quality on the user's own index, with no
hand-written queries.

Known-item queries are built from what the index holds, in the corpus's own
languages:

- ``link``: the words around a ``[[wikilink]]`` (the link itself removed) → the note
  it links to. The linking note is left out of the ranking: it holds those very words.
- ``heading``: a heading's text → its section (that heading of that document, or a
  section under it). Headings equal to their note's title, or used in more than one
  document ("Notes", "References"), are skipped.
- ``fragment``: the most distinctive run of 6–10 words of a document (6–12
  characters in scripts written without spaces), by the document frequency of its
  words (bigrams in those scripts), holding at least one word no other document
  has → that document.

Everything is deterministic: candidates are ordered by hashes of their content, at
most ``MAX_PER_TYPE`` of each type, taken in turn from each source. A query's hash
also puts it in the held-out half (the headline numbers) or the tuning half (for
whoever tunes settings against it). The set is written to
``<data_dir>/eval/self-queries.json`` and reused by later runs (queries whose
target is gone are dropped and counted), so runs compare; every run appends its
scores and the settings that shaped them to ``<data_dir>/eval/self-history.jsonl``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_serving.evaluation.self_eval.fragments import distinctive_fragment
from rag_serving.evaluation.self_eval.headings import document_sections
from rag_serving.evaluation.self_eval.history import (
    append_history,
    deltas,
    previous_run,
    read_history,
    settings_changes,
    settings_of,
)
from rag_serving.evaluation.self_eval.links import link_context, link_queries
from rag_serving.evaluation.self_eval.params import (
    HISTORY_FILE,
    MODES,
    QUERIES_FILE,
    QUERY_TYPES,
    K,
)
from rag_serving.evaluation.self_eval.queries import (
    Corpus,
    QuerySet,
    SelfQuery,
    Vocabulary,
    read_corpus,
)
from rag_serving.evaluation.self_eval.query_set import (
    build_queries,
    drop_missing,
    eval_dir,
    load_query_set,
    save_query_set,
)
from rag_serving.evaluation.self_eval.scoring import ModeResult, rank_of, run_queries
from rag_serving.evaluation.self_eval.words import terms, tokens
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore
from rag_sources.errors import RaglineError

if TYPE_CHECKING:
    from rag_serving.config import RaglineConfig


@dataclass
class SelfEvalReport:
    query_set: QuerySet
    path: Path
    built: bool  # a new set was built by this run
    sources: list[str]
    evaluated: list[SelfQuery]
    dropped: int
    results: list[ModeResult]
    delta: dict[str, Any]
    previous: dict[str, Any] | None
    changes: list[str]
    missing_sources: list[str]  # configured and indexed, but not in the stored set
    seconds: float

    def as_json(self) -> dict[str, Any]:
        counts = Counter(q.split for q in self.evaluated)
        return {
            "query_set": {
                "path": str(self.path),
                "created": self.query_set.created,
                "built_now": self.built,
                "sources": self.sources,
                "queries": len(self.evaluated),
                "heldout": counts["heldout"],
                "tuning": counts["tuning"],
                "by_type": dict(Counter(q.type for q in self.evaluated)),
                "dropped": self.dropped,
                "not_covered_sources": self.missing_sources,
            },
            "modes": [
                {
                    "mode": r.mode,
                    **r.as_json(),
                    "delta": self.delta.get(r.mode),
                    "seconds": round(r.seconds, 2),
                }
                for r in self.results
            ],
            "previous": None
            if self.previous is None
            else {"at": self.previous.get("at"), "settings_changed": self.changes},
            "seconds": round(self.seconds, 2),
        }


def indexed_sources(config: RaglineConfig) -> list[str]:
    """Sources that have documents in the index."""
    store = IndexStore.of(config, read_only=True)
    rows = store.read("documents", columns=["source"]).column("source").to_pylist()
    return sorted(set(rows))


def self_evaluate(
    config: RaglineConfig,
    sources: Sequence[str] = (),
    modes: Sequence[str] = MODES,
    limit: int | None = None,
    rebuild: bool = False,
    on_query: Callable[[str], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> SelfEvalReport:
    """Build or reuse the query set, run it in each mode, record and compare."""
    started = time.perf_counter()
    layout = IndexLayout(Path(config.data_dir), config.index_uri)
    read_manifest(layout.manifest_path)  # a clear error when nothing is indexed yet
    for mode in modes:
        if mode not in MODES:
            raise RaglineError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
    for name in sources:
        config.source(name)  # unknown names: ConfigError with close matches
    indexed = indexed_sources(config)
    for name in sources:
        if name not in indexed:
            raise RaglineError(
                f"source {name!r} has nothing indexed yet; run `ragline index {name}` first"
            )
    if not indexed:
        raise RaglineError(
            f"the index at {config.data_dir} holds no documents; run `ragline index`"
        )
    path = eval_dir(config) / QUERIES_FILE
    stored = None if rebuild else load_query_set(path)
    built = stored is None
    missing: list[str] = []
    if stored is not None:
        uncovered = [s for s in sources if s not in stored.sources]
        if uncovered:
            raise RaglineError(
                f"the stored query set ({path}, built {stored.created} from "
                f"{', '.join(stored.sources)}) does not cover source {uncovered[0]!r}; "
                "add --rebuild-queries to build a new one"
            )
        selected = list(sources) or [s for s in stored.sources if s in indexed]
        missing = [s for s in indexed if s not in stored.sources] if not sources else []
        query_set = stored
    else:
        selected = list(sources) or indexed
        query_set = build_queries(read_corpus(config, selected), selected)
        if not query_set.queries:
            raise RaglineError(
                f"no known-item query could be built from {', '.join(selected)}: the notes "
                "need headings, links between them or text of their own"
            )
        save_query_set(path, query_set)
    corpus = read_corpus(config, selected)
    wanted = [q for q in query_set.queries if q.source in selected]
    present, dropped = drop_missing(wanted, corpus) if not built else (wanted, 0)
    evaluated = _limited(present, limit)
    if not evaluated:
        raise RaglineError(
            f"no query of {path} has its answer in the index any more; "
            "add --rebuild-queries to build a new set"
        )
    if on_total is not None:
        on_total(len(evaluated))

    from rag_serving.search import SearchEngine

    engine = SearchEngine(config, read_consistency_s=None)
    results = run_queries(engine, evaluated, modes, selected, document_sections(corpus), on_query)
    settings = settings_of(config, corpus.generation)
    history_path = eval_dir(config) / HISTORY_FILE
    comparable = {"query_set": query_set.set_id, "sources": sorted(selected), "limit": limit}
    previous = previous_run(read_history(history_path), comparable)
    delta = deltas(results, previous)
    changes = settings_changes(previous.get("settings") or {}, settings) if previous else []
    entry = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        **comparable,
        "queries": len(evaluated),
        "dropped": dropped,
        "settings": settings,
        "results": {r.mode: r.as_json() for r in results},
    }
    append_history(history_path, entry)
    return SelfEvalReport(
        query_set,
        path,
        built,
        sorted(selected),
        evaluated,
        dropped,
        results,
        delta,
        previous,
        changes,
        missing,
        time.perf_counter() - started,
    )


def _limited(queries: list[SelfQuery], limit: int | None) -> list[SelfQuery]:
    """The first ``limit`` queries of each type (all without a limit)."""
    if limit is None:
        return queries
    taken: Counter[str] = Counter()
    kept = []
    for query in queries:
        if taken[query.type] < limit:
            taken[query.type] += 1
            kept.append(query)
    return kept


__all__ = [
    "MODES",
    "QUERY_TYPES",
    "QuerySet",
    "SelfEvalReport",
    "SelfQuery",
    "build_queries",
    "distinctive_fragment",
    "link_context",
    "read_corpus",
    "self_evaluate",
    "terms",
    "tokens",
]


__all__ = [
    "HISTORY_FILE",
    "QUERIES_FILE",
    "QUERY_TYPES",
    "Corpus",
    "K",
    "SelfEvalReport",
    "Vocabulary",
    "build_queries",
    "distinctive_fragment",
    "link_context",
    "link_queries",
    "rank_of",
    "read_corpus",
    "self_evaluate",
    "terms",
    "tokens",
]
