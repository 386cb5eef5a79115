"""Building the set from a corpus, storing it and reusing it."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rag_sources.errors import RaglineError

if TYPE_CHECKING:
    from rag_serving.config import RaglineConfig

from rag_serving.evaluation.self_eval.fragments import fragment_queries
from rag_serving.evaluation.self_eval.headings import (
    document_sections,
    heading_queries,
    section_lines,
)
from rag_serving.evaluation.self_eval.links import link_queries
from rag_serving.evaluation.self_eval.params import MAX_PER_TYPE, QUERY_TYPES, SET_FORMAT
from rag_serving.evaluation.self_eval.queries import Corpus, QuerySet, SelfQuery, Vocabulary


def build_queries(corpus: Corpus, sources: Sequence[str], cap: int = MAX_PER_TYPE) -> QuerySet:
    """Known-item queries of each type from ``corpus``, at most ``cap`` per type."""
    vocabulary = Vocabulary(corpus)
    built = {
        "link": link_queries(corpus),
        "heading": heading_queries(corpus),
        "fragment": fragment_queries(corpus, vocabulary),
    }
    queries: list[SelfQuery] = []
    for type_ in QUERY_TYPES:
        queries += _spread(built[type_], cap)
    return QuerySet(
        queries=queries,
        sources=sorted(sources),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        index={
            **corpus.generation,
            "documents": len(corpus.documents),
            "chunks": len(corpus.chunks),
        },
        candidates={t: len(built[t]) for t in QUERY_TYPES},
    )


def _spread(candidates: list[SelfQuery], cap: int) -> list[SelfQuery]:
    """At most ``cap`` candidates, taken in turn from each source, each source's in
    hash order (deterministic, and no source crowds out the others)."""
    by_source: dict[str, list[SelfQuery]] = defaultdict(list)
    for query in sorted(candidates, key=lambda q: q.id):
        by_source[query.source].append(query)
    queues = [by_source[s] for s in sorted(by_source)]
    picked: list[SelfQuery] = []
    index = 0
    while len(picked) < cap and any(index < len(q) for q in queues):
        for queue in queues:
            if index < len(queue) and len(picked) < cap:
                picked.append(queue[index])
        index += 1
    return picked


def eval_dir(config: RaglineConfig) -> Path:
    return Path(config.data_dir) / "eval"


def load_query_set(path: Path) -> QuerySet | None:
    """The stored set, or None when there is none (a damaged file is an error)."""
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw.get("format") != SET_FORMAT:
            return None  # an older layout: build a new set
        queries = [SelfQuery(**q) for q in raw["queries"]]
        return QuerySet(
            queries,
            list(raw["sources"]),
            str(raw["created"]),
            dict(raw.get("index") or {}),
            dict(raw.get("candidates") or {}),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RaglineError(
            f"{path} cannot be read ({exc}); run `ragline eval --self --rebuild-queries` "
            "to build a new query set"
        ) from None


def save_query_set(path: Path, query_set: QuerySet) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(
        json.dumps(query_set.as_json(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    os.replace(tmp, path)


def drop_missing(queries: Iterable[SelfQuery], corpus: Corpus) -> tuple[list[SelfQuery], int]:
    """The queries whose answer the index still holds, and how many were dropped."""
    documents = {d["doc_id"] for d in corpus.documents}
    sections = document_sections(corpus)
    kept, dropped = [], 0
    for query in queries:
        present = (
            section_lines(query, sections) is not None
            if query.type == "heading"
            else query.doc_id in documents
        )
        if present:
            kept.append(query)
        else:
            dropped += 1
    return kept, dropped
