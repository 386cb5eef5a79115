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

import hashlib
import json
import math
import os
import re
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_serving.index.analysis import NOSPACE_RUN
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore, sql_in
from rag_sources.errors import RaglineError

if TYPE_CHECKING:
    from rag_serving.config import RaglineConfig
    from rag_serving.search import SearchEngine

QUERY_TYPES = ("link", "heading", "fragment")
MODES = ("hybrid", "bm25", "vector")
K = 10
MAX_PER_TYPE = 300
# Links to one note: at most this many queries, so a hub note does not fill the set.
MAX_LINKS_PER_TARGET = 2
SET_FORMAT = 1
QUERIES_FILE = "self-queries.json"
HISTORY_FILE = "self-history.jsonl"
# Chunks asked of each search: enough for ten distinct documents or sections.
SEARCH_DEPTH = 50

# Words around a link: about eight (a character of a script without spaces counts half).
_CONTEXT_WEIGHT = 8.0
_MIN_CONTEXT_WEIGHT = 3.0
# A fragment: 6–10 words, or 6–12 characters of a script without spaces.
_FRAGMENT_WORDS = (6, 10)
_FRAGMENT_CHARS = (6, 12)
_MAX_WORD_CHARS = 30  # longer "words" are hashes, base64, URLs: no one types them

_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_MD_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
# Not shown to a reader: Obsidian and HTML comments, HTML tags.
_HIDDEN = re.compile(r"%%.*?%%|<!--.*?-->", re.DOTALL)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")
_BLOCK_START = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|>|\||```|~~~)")
_SEGMENT_BREAK = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*+]\s|\d+[.)]\s|#{1,6}\s|>|\|))|[.!?。！？؟।|]")
_MARKER = "\ue000"  # stands for the removed link in a context (a private-use character)


# ---- words in every script ----------------------------------------------------


@cache
def _token_pattern() -> re.Pattern[str]:
    """Words (a letter or digit, then letters, digits and combining marks, so a
    Devanagari or vowelled Arabic word stays whole) or single characters of the
    scripts written without spaces."""
    nospace = NOSPACE_RUN.pattern[1:-2]  # "[...]+" → the ranges inside the brackets
    first = _char_class(lambda c: unicodedata.category(c)[0] in "LN")
    rest = _char_class(lambda c: unicodedata.category(c)[0] in "LNM")
    return re.compile(f"(?P<c>[{nospace}])|(?P<w>[{first}][{rest}]*)")


def _char_class(wanted: Callable[[str], bool]) -> str:
    """A regex class of the characters (below U+30000) that are ``wanted`` and not of
    a script written without spaces."""
    ranges: list[tuple[int, int]] = []
    start: int | None = None
    for code in range(0x30001):
        char = chr(code)
        inside = code < 0x30000 and wanted(char) and not NOSPACE_RUN.match(char)
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            ranges.append((start, code - 1))
            start = None
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int
    char: bool  # one character of a script without spaces

    @property
    def weight(self) -> float:
        return 0.5 if self.char else 1.0


def tokens(text: str) -> list[Token]:
    """The words and no-space-script characters of ``text``, in order."""
    return [
        Token(m.group(0), m.start(), m.end(), m.group("c") is not None)
        for m in _token_pattern().finditer(text)
    ]


def join_tokens(toks: Sequence[Token]) -> str:
    """Tokens as query text: words spaced, runs of no-space characters kept together."""
    out: list[str] = []
    for i, tok in enumerate(toks):
        if i and not (tok.char and toks[i - 1].char):
            out.append(" ")
        out.append(tok.text)
    return "".join(out)


def terms(text: str) -> set[str]:
    """The terms whose document frequency makes a fragment distinctive: case-folded
    words, and the character bigrams (a lone character: itself) of no-space runs."""
    found: set[str] = set()
    run: list[str] = []
    for tok in tokens(text):
        if tok.char:
            run.append(tok.text)
            continue
        found.update(_run_terms(run))
        run = []
        found.add(tok.text.casefold())
    found.update(_run_terms(run))
    return found


def _run_terms(run: list[str]) -> list[str]:
    if len(run) == 1:
        return run
    return [run[i] + run[i + 1] for i in range(len(run) - 1)]


def readable(text: str) -> str:
    """Markdown as a reader sees it: links as their text; URLs, comments and HTML
    tags removed."""
    text = _HTML_TAG.sub(" ", _HIDDEN.sub(" ", text))
    text = _WIKILINK.sub(lambda m: _link_display(m.group(2)), text)
    text = _MD_LINK.sub(lambda m: m.group(1), text)
    return _URL.sub(" ", text)


def _link_parts(inner: str) -> tuple[str, str | None]:
    """The target of a wikilink's inside (``Note#Heading|alias``) and its alias."""
    inner = inner.replace("\\|", "|")
    target, sep, alias = inner.partition("|")
    return target.partition("#")[0].strip(), (alias.strip() or None) if sep else None


def _link_display(inner: str) -> str:
    target, alias = _link_parts(inner)
    if alias:
        return alias
    heading = inner.replace("\\|", "|").partition("|")[0].partition("#")[2].strip()
    return " ".join(x for x in (target.rsplit("/", 1)[-1], heading) if x)


# ---- the query set ------------------------------------------------------------


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


# ---- link queries ---------------------------------------------------------------


def link_queries(corpus: Corpus) -> list[SelfQuery]:
    """A wikilink's surrounding words → the note it links to (resolved as Obsidian
    resolves links, within the linking note's source)."""
    from rag_serving.mcp.links import LinkGraph

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


# ---- heading queries --------------------------------------------------------------

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


# ---- fragment queries -------------------------------------------------------------


def fragment_queries(corpus: Corpus, vocabulary: Vocabulary) -> list[SelfQuery]:
    """Each document's most distinctive fragment → that document."""
    best: dict[str, tuple[float, str, dict[str, Any]]] = {}
    for chunk in corpus.chunks:
        found = distinctive_fragment(chunk["text"] or "", vocabulary, chunk["doc_id"])
        if found is None:
            continue
        score, text = found
        current = best.get(chunk["doc_id"])
        # Ties go to the smaller hash, so the choice does not depend on row order.
        if current is None or (score, _hash(current[1])) > (current[0], _hash(text)):
            best[chunk["doc_id"]] = (score, text, chunk)
    queries = []
    for doc_id, (_score, text, chunk) in best.items():
        title = _heading_key(chunk.get("title") or "")
        if _heading_key(text) == title:
            continue
        queries.append(SelfQuery.make("fragment", chunk["source"], text, doc_id, chunk["path"]))
    return queries


def distinctive_fragment(
    text: str, vocabulary: Vocabulary, doc_id: str
) -> tuple[float, str] | None:
    """The window of ``text`` whose terms are rarest (mean inverse document frequency)
    among the windows that only document ``doc_id`` holds every rare term of (text
    quoted in another note names no single answer); None when there is none."""
    best: tuple[float, str] | None = None
    for segment in _SEGMENT_BREAK.split(readable(text)):
        toks = [t for t in tokens(segment) if len(t.text) <= _MAX_WORD_CHARS]
        if not toks:
            continue
        chars = sum(t.char for t in toks)
        low, high = _FRAGMENT_CHARS if chars * 2 > len(toks) else _FRAGMENT_WORDS
        if len(toks) < low:
            continue
        size = min(high, len(toks))
        for begin in range(len(toks) - size + 1):
            window = toks[begin : begin + size]
            if not any(t.text[0].isalpha() or t.char for t in window):
                continue
            query = join_tokens(window)
            found = terms(query)
            score = vocabulary.mean_idf(found)
            if best is not None and (score, _hash(best[1])) <= (best[0], _hash(query)):
                continue
            if vocabulary.only_in(found) == doc_id:
                best = (score, query)
    return best


# ---- storing and reusing the set ----------------------------------------------------


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


# ---- scoring -------------------------------------------------------------------------


@dataclass
class Scores:
    """Mean MRR@10 and hit@10 of a group of queries."""

    mrr: float = 0.0
    hit: float = 0.0
    queries: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            f"mrr@{K}": round(self.mrr, 6),
            f"hit@{K}": round(self.hit, 6),
            "queries": self.queries,
        }


def _mean(ranks: list[int | None]) -> Scores:
    if not ranks:
        return Scores()
    mrr = sum(1.0 / r for r in ranks if r is not None) / len(ranks)
    hit = sum(1 for r in ranks if r is not None) / len(ranks)
    return Scores(mrr, hit, len(ranks))


def rank_of(
    query: SelfQuery, hits: Sequence[Any], lines: tuple[int, int] | None = None
) -> int | None:
    """1-based rank of the answer among the first ``K`` distinct documents (sections
    for a heading query, whose ``lines`` a relevant chunk overlaps) of ``hits``; None
    when it is not among them."""
    units: set[tuple[str, str]] = set()
    for hit in hits:
        if query.origin is not None and hit.doc_id == query.origin:
            continue
        unit = (hit.doc_id, hit.anchor if query.type == "heading" else "")
        if unit not in units:
            units.add(unit)
            if len(units) > K:
                return None
        if hit.doc_id != query.doc_id:
            continue
        if query.type != "heading":
            return len(units)
        if lines is not None and hit.line_start <= lines[1] and hit.line_end >= lines[0]:
            return len(units)
    return None


@dataclass
class ModeResult:
    mode: str
    splits: dict[str, Scores]  # heldout, tuning
    by_type: dict[str, dict[str, Scores]]  # split → type → scores
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {
            split: {
                **self.splits[split].as_json(),
                "by_type": {t: s.as_json() for t, s in self.by_type[split].items()},
            }
            for split in ("heldout", "tuning")
        }


def run_queries(
    engine: SearchEngine,
    queries: Sequence[SelfQuery],
    modes: Sequence[str],
    sources: Sequence[str],
    sections: dict[str, list[Section]],
    on_query: Callable[[str], None] | None = None,
) -> list[ModeResult]:
    """Run every query in every mode and score it (``sections``: each document's
    sections now, where heading queries find their answer)."""
    from rag_serving.search import SearchFilters

    filters = SearchFilters(sources=tuple(sources))
    results = []
    for mode in modes:
        started = time.perf_counter()
        ranks: dict[str, dict[str, list[int | None]]] = {
            s: defaultdict(list) for s in ("heldout", "tuning")
        }
        for query in queries:
            hits = engine.search(query.query, k=SEARCH_DEPTH, filters=filters, mode=mode).hits  # type: ignore[arg-type]
            lines = section_lines(query, sections) if query.type == "heading" else None
            ranks[query.split][query.type].append(rank_of(query, hits, lines))
            if on_query is not None:
                on_query(mode)
        splits = {s: _mean([r for rs in ranks[s].values() for r in rs]) for s in ranks}
        by_type = {s: {t: _mean(ranks[s][t]) for t in QUERY_TYPES if ranks[s][t]} for s in ranks}
        results.append(ModeResult(mode, splits, by_type, time.perf_counter() - started))
    return results


# ---- settings and history ----------------------------------------------------------


def settings_of(config: RaglineConfig, index: dict[str, Any]) -> dict[str, Any]:
    """What shapes the results: the live vectors' model, the configured embedder,
    chunking and search (fusion) settings."""
    backends = {"query_backend", "document_backend"}
    return {
        "index_embedder": index.get("embedder"),
        "embedder": config.embedder.model_dump(mode="json", exclude_none=True, exclude=backends),
        "chunking": config.chunking.model_dump(mode="json", exclude_none=True),
        "search": config.search.model_dump(mode="json", exclude_none=True, exclude={"k", "mode"}),
    }


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def settings_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``name: old → new`` for each setting that differs."""
    old, new = _flatten(before), _flatten(after)
    return [
        f"{key}: {old.get(key)} → {new.get(key)}"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]


def read_history(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by an interrupted write
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def previous_run(history: list[dict[str, Any]], comparable: dict[str, Any]) -> dict | None:
    """The last run over the same query set, sources and limit."""
    for entry in reversed(history):
        if all(entry.get(k) == v for k, v in comparable.items()):
            return entry
    return None


def deltas(results: list[ModeResult], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Per mode and split: the change of MRR@10 and hit@10 since ``previous``."""
    if previous is None:
        return {}
    out: dict[str, Any] = {}
    for result in results:
        before = (previous.get("results") or {}).get(result.mode)
        if not before:
            continue
        out[result.mode] = {
            split: {
                f"mrr@{K}": round(result.splits[split].mrr - before[split][f"mrr@{K}"], 6),
                f"hit@{K}": round(result.splits[split].hit - before[split][f"hit@{K}"], 6),
            }
            for split in ("heldout", "tuning")
            if split in before
        }
    return out


def append_history(path: Path, entry: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")


# ---- one run ---------------------------------------------------------------------------


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
