"""Search hits grown to their context within one character budget.

A 300-character snippet is rarely enough to answer from, and opening each hit costs
a round-trip. Here each hit grows from its own lines to its natural unit — the
whole function or class of a code chunk, the page, slide, sheet or chapter it is on,
the innermost heading section of a note, the whole message or commit — while the
budget lasts. The budget is shared: first every hit gets its own lines (best hit
first), then all grow in rounds of an equal share, so the first hit cannot starve
the rest. Hits inside a context already given are marked as such instead of
repeating it, the same text in two documents is given once, and page furniture
(running headers and footers, page numbers) is left out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_serving.index.store import IndexStore
from rag_serving.reading.code import symbol_range
from rag_serving.reading.excerpts import Body
from rag_sources.where import sql_in

# A line that is only a page number: "12", "- 12 -", "Page 3", "page 3 of 10", "iv".
_PAGE_NUMBER = re.compile(
    r"^\W*(?:page\s+)?(?:\d{1,4}|[ivxlc]{1,6})(?:\s+(?:of|/)\s+\d{1,4})?\W*$", re.IGNORECASE
)
_EDGE_NUMBER = re.compile(r"^\d{1,4}\s+|\s+\d{1,4}$")
# Lines at either end of a part that count as its furniture when they repeat.
_EDGE_LINES = 3


@dataclass
class HitContext:
    """One hit's context: file lines ``line_start``..``line_end`` of its document."""

    chunk_id: str
    doc_id: str
    section: str | None  # "Install > Linux", "Page 6", "function retry"
    line_start: int
    line_end: int
    text: str = ""
    # The whole section is given (not cut by the budget).
    complete: bool = False
    # The chunk id of an earlier hit whose context already holds this hit's lines (or
    # the same text): this one's text is empty.
    same_as: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "lines": [self.line_start, self.line_end],
            "text": self.text,
            "complete": self.complete,
            "same_as": self.same_as,
        }


@dataclass
class _Block:
    """A growing range of a document's lines, and the unit it may grow to."""

    hit: HitContext
    body: Body
    lines: list[str]  # the body's lines, furniture blanked
    first: int  # file line numbers: what is given so far...
    last: int
    low: int  # ...and how far it may grow
    high: int
    used: int = 0
    members: list[HitContext] = field(default_factory=list)

    def size(self, start: int, end: int) -> int:
        return sum(len(self._line(n)) + 1 for n in range(start, end + 1))

    def _line(self, number: int) -> str:
        return self.lines[number - self.body.first_line]

    def text(self) -> str:
        kept = [self._line(n) for n in range(self.first, self.last + 1)]
        return _squeeze("\n".join(kept))


def assemble_context(
    store: IndexStore, table: str | None, hits: Sequence[Any], budget: int
) -> dict[str, HitContext]:
    """Each hit's context by chunk id, within ``budget`` characters in all (hits the
    budget does not reach are left out)."""
    if not hits or budget <= 0 or table is None:
        return {}
    doc_ids = sorted({hit.doc_id for hit in hits})
    docs = {
        row["doc_id"]: row
        for row in store.read(
            "documents",
            where=sql_in("doc_id", doc_ids),
            columns=["doc_id", "body", "body_start_line", "sections_json"],
        ).to_pylist()
    }
    chunk_ids = [hit.chunk_id for hit in hits]
    chunks = {
        row["chunk_id"]: row
        for row in store.read(
            table,
            where=sql_in("chunk_id", chunk_ids),
            columns=["chunk_id", "doc_id", "line_start", "line_end", "heading", "facets"],
        ).to_pylist()
    }
    bodies: dict[str, tuple[Body, list[str]]] = {}
    blocks: list[_Block] = []
    out: dict[str, HitContext] = {}
    for hit in hits:
        doc, chunk = docs.get(hit.doc_id), chunks.get(hit.chunk_id)
        if doc is None or chunk is None or hit.chunk_id in out:
            continue
        if hit.doc_id not in bodies:
            body = Body.of(
                doc["body"] or "", int(doc["body_start_line"] or 1), doc["sections_json"]
            )
            bodies[hit.doc_id] = (body, _without_furniture(body))
        body, lines = bodies[hit.doc_id]
        start = max(int(chunk["line_start"]), body.first_line)
        end = min(int(chunk["line_end"]), body.last_line)
        if end < start:
            continue
        low, high, section = _unit(store, table, body, chunk, start, end)
        context = HitContext(hit.chunk_id, hit.doc_id, section, start, end)
        out[hit.chunk_id] = context
        holder = next(
            (b for b in blocks if b.hit.doc_id == hit.doc_id and b.low <= start and end <= b.high),
            None,
        )
        if holder is not None:  # the same page, section or function as a better hit
            context.same_as = holder.hit.chunk_id
            holder.members.append(context)
            holder.first, holder.last = min(holder.first, start), max(holder.last, end)
            continue
        blocks.append(_Block(context, body, lines, start, end, low, high))

    budget_left = budget
    given: list[_Block] = []
    for block in blocks:  # every hit's own lines first, best hit first
        size = block.size(block.first, block.last)
        if size > budget_left and not given:  # the best hit is cut rather than left out
            while size > budget_left and block.last > block.first:
                block.last -= 1
                size = block.size(block.first, block.last)
        if size > budget_left:
            continue  # left out; a smaller hit after it may fit
        block.used, budget_left = size, budget_left - size
        given.append(block)
    growing = list(given)
    while growing and budget_left > 0:  # then all grow by an equal share per round
        share = max(budget_left // len(growing), 1)
        progress = False
        for block in growing:
            grown = _grow(block, min(share, budget_left))
            budget_left -= grown
            progress = progress or grown > 0
        growing = [b for b in growing if b.first > b.low or b.last < b.high]
        if not progress:
            break

    seen_texts: dict[str, str] = {}
    result: dict[str, HitContext] = {}
    for block in given:
        context = block.hit
        context.line_start, context.line_end = block.first, block.last
        context.complete = block.first <= block.low and block.last >= block.high
        text = block.text()
        key = " ".join(text.split()).casefold()
        if key in seen_texts:  # the same passage in another document
            context.same_as = seen_texts[key]
            text = ""
        else:
            seen_texts[key] = context.chunk_id
        context.text = text
        result[context.chunk_id] = context
        for member in block.members:
            member.line_start, member.line_end = block.first, block.last
            result[member.chunk_id] = member
    return result


def _grow(block: _Block, room: int) -> int:
    """Add lines around ``block`` (after first, then before) up to ``room`` characters
    and within its unit; returns the characters added."""
    added = 0
    while True:
        step = None
        if block.last < block.high:
            cost = block.size(block.last + 1, block.last + 1)
            if added + cost <= room:
                block.last += 1
                step = cost
        if block.first > block.low:
            cost = block.size(block.first - 1, block.first - 1)
            if added + (step or 0) + cost <= room:
                block.first -= 1
                step = (step or 0) + cost
        if step is None:
            break
        added += step
    block.used += added
    return added


def _unit(
    store: IndexStore, table: str, body: Body, chunk: dict[str, Any], start: int, end: int
) -> tuple[int, int, str | None]:
    """(first line, last line, name) of the unit a chunk's context may grow to: its
    whole symbol, the part it is on, its innermost heading section, else the document."""
    symbol = symbol_range(store, table, chunk)
    if symbol is not None:
        return max(symbol[0], body.first_line), min(symbol[1], body.last_line), symbol[2]
    part = next((p for p in body.parts if p.line_start <= start <= p.line_end), None)
    if part is not None:
        return part.line_start, part.line_end, part.label
    sections = [s for s in body.sections() if s.line_start <= start and end <= s.line_end]
    if sections:
        inner = max(sections, key=lambda s: s.line_start)
        return inner.line_start, inner.line_end, inner.title
    return body.first_line, body.last_line, chunk.get("heading") or None


def _without_furniture(body: Body) -> list[str]:
    """The body's lines with page furniture blanked: page numbers, and lines that repeat
    at the top or bottom of many parts (running headers and footers)."""
    lines = list(body.lines)
    if len(body.parts) < 3:
        return lines
    edges: Counter[str] = Counter()
    for part in body.parts:
        numbers = range(part.line_start, part.line_end + 1)
        edge = [*numbers[:_EDGE_LINES], *numbers[-_EDGE_LINES:]]
        edges.update({_key(lines[n - body.first_line]) for n in edge if _inside(body, n)})
    # Three parts and a third of them: a table row or a form's question that recurs on
    # a few pages of a long document is content, not a running header.
    repeated = {
        key
        for key, count in edges.items()
        if key and count >= 3 and count * 10 > len(body.parts) * 3
    }
    for part in body.parts:
        numbers = [n for n in range(part.line_start, part.line_end + 1) if _inside(body, n)]
        for n in [*numbers[:_EDGE_LINES], *numbers[-_EDGE_LINES:]]:
            if _key(lines[n - body.first_line]) in repeated:
                lines[n - body.first_line] = ""
        written = [n for n in numbers if lines[n - body.first_line].strip()]
        for n in {written[0], written[-1]} if written else ():  # a page number
            if _PAGE_NUMBER.match(lines[n - body.first_line].strip()):
                lines[n - body.first_line] = ""
    return lines


def _inside(body: Body, number: int) -> bool:
    return body.first_line <= number <= body.last_line


def _key(line: str) -> str:
    """A line as furniture repeats it: spacing and a page number at either end ignored."""
    return _EDGE_NUMBER.sub("#", " ".join(line.split()).casefold())


def _squeeze(text: str) -> str:
    """No runs of blank lines (left where furniture was)."""
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")
