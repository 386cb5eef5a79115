"""``heading`` queries: a heading's text → its section."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from rag_serving.evaluation.self_eval.queries import Corpus, SelfQuery
from rag_serving.evaluation.self_eval.words import join_tokens, readable, tokens

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


@dataclass(frozen=True)
class Section:
    """A heading of a document and the lines its section spans (inclusive)."""

    heading: str  # the heading's own text, as written
    start: int
    end: int


def document_sections(corpus: Corpus) -> dict[str, list[Section]]:
    """Every document's sections, from the served chunks: Markdown headings in the
    chunks' text (a section runs to the next heading of its level or above), and the
    chunks' heading paths that no such line gives (headings of PDFs, e-books)."""
    by_doc: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for chunk in corpus.chunks:
        by_doc[chunk["doc_id"]].append(chunk)
    sections: dict[str, list[Section]] = {}
    for doc_id, chunks in by_doc.items():
        chunks.sort(key=lambda c: (c.get("line_start") or 0, c.get("line_end") or 0))
        last = max((c.get("line_end") or 0) for c in chunks)
        found: list[tuple[int, int, str]] = []  # (line, level, text)
        seen_lines: set[int] = set()
        for chunk in chunks:
            fenced = False
            for offset, line in enumerate((chunk.get("text") or "").split("\n")):
                if _FENCE.match(line):
                    fenced = not fenced
                    continue
                match = None if fenced else _ATX.match(line)
                number = (chunk.get("line_start") or 0) + offset
                if match and number not in seen_lines:
                    seen_lines.add(number)
                    found.append((number, len(match.group(1)), match.group(2).strip()))
        found.sort()
        result = []
        for i, (line, level, text) in enumerate(found):
            end = next((n - 1 for n, lv, _ in found[i + 1 :] if lv <= level), last)
            result.append(Section(text, line, max(end, line)))
        written = {_heading_key(s.heading) for s in result}
        spans: dict[str, list[int]] = {}
        for chunk in chunks:
            path = (chunk.get("heading") or "").strip()
            name = path.rsplit(" > ", 1)[-1]
            if not path or _heading_key(name) in written or not chunk.get("line_end"):
                continue
            span = spans.setdefault(name, [chunk["line_start"] or 0, chunk["line_end"]])
            span[0] = min(span[0], chunk["line_start"] or 0)
            span[1] = max(span[1], chunk["line_end"])
        result += [Section(name, a, b) for name, (a, b) in spans.items()]
        sections[doc_id] = result
    return sections


def heading_queries(corpus: Corpus) -> list[SelfQuery]:
    """A heading's text → its section, for headings that name one section only."""
    sections = document_sections(corpus)
    info = {c["doc_id"]: c for c in corpus.chunks}
    used: Counter[str] = Counter()
    for doc_sections in sections.values():
        used.update(_heading_key(s.heading) for s in doc_sections)
    found = []
    for doc_id, doc_sections in sections.items():
        chunk = info[doc_id]
        title = chunk.get("title") or ""
        path_stem = (chunk.get("path") or "").rsplit("/", 1)[-1].rsplit(".", 1)[0]
        trivial = {_heading_key(title), _heading_key(path_stem)}
        for section in doc_sections:
            key = _heading_key(section.heading)
            toks = tokens(readable(section.heading))
            # Used twice ("Notes", "See also"): no single answer. The title: trivial.
            letters = sum(len(t.text) for t in toks if not t.char) + 2 * sum(t.char for t in toks)
            if used[key] > 1 or key in trivial or letters < 4:
                continue
            found.append(
                SelfQuery.make(
                    "heading",
                    chunk["source"],
                    join_tokens(toks),
                    doc_id,
                    chunk.get("path") or "",
                    heading=section.heading,
                )
            )
    return found


def section_lines(query: SelfQuery, sections: dict[str, list[Section]]) -> tuple[int, int] | None:
    """Where a heading query's section is in the document now (None: gone)."""
    key = _heading_key(query.heading or "")
    for section in sections.get(query.doc_id, []):
        if _heading_key(section.heading) == key:
            return section.start, section.end
    return None


def _heading_key(text: str) -> str:
    return " ".join(t.text.casefold() for t in tokens(readable(text)))
