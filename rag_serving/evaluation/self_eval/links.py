"""``link`` queries: the words around a wikilink → the note it links to."""

from __future__ import annotations

from collections import Counter, defaultdict

from rag_serving.evaluation.self_eval.params import MAX_LINKS_PER_TARGET
from rag_serving.evaluation.self_eval.queries import Corpus, SelfQuery
from rag_serving.evaluation.self_eval.words import (
    _BLOCK_START,
    _CONTEXT_WEIGHT,
    _MARKER,
    _MAX_WORD_CHARS,
    _MIN_CONTEXT_WEIGHT,
    _WIKILINK,
    Token,
    _link_parts,
    join_tokens,
    readable,
    tokens,
)


def link_queries(corpus: Corpus) -> list[SelfQuery]:
    """A wikilink's surrounding words → the note it links to (resolved as Obsidian
    resolves links, within the linking note's source)."""
    from rag_serving.index.links import LinkGraph

    rows = [{**d, "aliases": d.get("aliases") or []} for d in corpus.documents]
    graph = LinkGraph.build(rows)
    by_id = {d["doc_id"]: d for d in corpus.documents}
    per_target: Counter[str] = Counter()
    found: list[SelfQuery] = []
    for doc in sorted(corpus.documents, key=lambda d: d["doc_id"]):
        body = doc.get("body") or ""
        resolved: dict[str, str] = {}
        for edge in graph.outgoing.get(doc["doc_id"], []):
            if edge.resolved is not None and edge.resolved.doc_id != doc["doc_id"]:
                resolved.setdefault(edge.link.target.strip().casefold(), edge.resolved.doc_id)
        if not resolved:
            continue
        for match in _WIKILINK.finditer(body):
            target_name, _alias = _link_parts(match.group(2))
            target = resolved.get(target_name.casefold())
            if target is None:
                continue
            context = link_context(body, match.start(), match.end())
            if context is None:
                continue
            query = SelfQuery.make(
                "link",
                doc["source"],
                context,
                target,
                by_id[target]["path"],
                origin=doc["doc_id"],
            )
            found.append(query)
    # The same words around links to different notes (a template's "Developed by
    # [[author]]") name no single answer.
    targets: dict[str, set[str]] = defaultdict(set)
    for query in found:
        targets[query.query.casefold()].add(query.doc_id)
    # Deterministic cap per target: the candidates of each target in hash order.
    kept: list[SelfQuery] = []
    seen: set[tuple[str, str]] = set()
    for query in sorted(found, key=lambda q: q.id):
        if len(targets[query.query.casefold()]) > 1:
            continue
        if (query.query, query.doc_id) in seen or per_target[query.doc_id] >= MAX_LINKS_PER_TARGET:
            continue
        seen.add((query.query, query.doc_id))
        per_target[query.doc_id] += 1
        kept.append(query)
    return kept


def link_context(body: str, start: int, end: int) -> str | None:
    """About eight words around the link at ``body[start:end]``, within its block
    (paragraph, list item, table row), the link removed; None when too few."""
    block_start, block_end = _block_bounds(body, start, end)
    text = body[block_start:start] + f" {_MARKER} " + body[end:block_end]
    text = readable(text)
    marker = text.find(_MARKER)
    if marker < 0:
        return None  # the link is in a comment: no reader sees its words
    before = tokens(text[:marker])
    after = tokens(text[marker + 1 :])
    left: list[Token] = []
    right: list[Token] = []
    weight = 0.0
    i, j = len(before) - 1, 0
    # Alternate sides, so the words nearest the link come first.
    while weight < _CONTEXT_WEIGHT and (i >= 0 or j < len(after)):
        for side in (0, 1):
            if weight >= _CONTEXT_WEIGHT:
                break
            if side == 0 and i >= 0:
                if len(before[i].text) <= _MAX_WORD_CHARS:
                    left.insert(0, before[i])
                    weight += before[i].weight
                i -= 1
            elif side == 1 and j < len(after):
                if len(after[j].text) <= _MAX_WORD_CHARS:
                    right.append(after[j])
                    weight += after[j].weight
                j += 1
    if weight < _MIN_CONTEXT_WEIGHT:
        return None
    parts = [join_tokens(left), join_tokens(right)]
    return " ".join(p for p in parts if p)


def _block_bounds(body: str, start: int, end: int) -> tuple[int, int]:
    """The Markdown block around ``body[start:end]``: its lines, up to a blank line or
    a line that starts another block (a list item, a heading, a table row)."""
    line_start = body.rfind("\n", 0, start) + 1
    while line_start > 0 and not _BLOCK_START.match(body[line_start:start]):
        previous = body.rfind("\n", 0, line_start - 1) + 1
        line = body[previous : line_start - 1]
        if not line.strip():
            break
        line_start = previous
        if _BLOCK_START.match(line):
            break
    line_end = body.find("\n", end)
    line_end = len(body) if line_end < 0 else line_end
    while line_end < len(body):
        following = body.find("\n", line_end + 1)
        following = len(body) if following < 0 else following
        line = body[line_end + 1 : following]
        if not line.strip() or _BLOCK_START.match(line):
            break
        line_end = following
    return line_start, line_end
