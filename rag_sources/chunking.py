"""Heading-aware chunking of a parsed note, measured in the embedder's own tokens.

How a note becomes chunks:

1. The body is cut into sections at top-level headings (ATX and setext, found with
   markdown-it-py, so a ``#`` line inside a code block is not a heading). Each
   section carries its heading path. A section holding nothing but its heading is
   folded into the section after it, so a bare heading is never a chunk alone.
2. A section whose embed text fits ``target_tokens`` is kept whole. Consecutive
   whole sections are merged while the merged embed text stays within
   ``target_tokens``; a merged chunk's ``heading_path`` is the longest common
   prefix of its sections' paths (the headings that enclose all of its text).
3. A larger section is cut on top-level block boundaries (paragraphs, lists,
   tables, code blocks), and the blocks are packed up to ``target_tokens``. A block
   over ``max_tokens`` is cut on nested block boundaries (list items, table rows),
   then lines, then sentences, and last at token boundaries (a search over
   character positions with ``count_tokens``, snapped back to whitespace). The
   heading line stays with the first block after it. Neighbouring chunks that
   still fit ``target_tokens`` together are merged (e.g. a short section after
   the last piece of a long one), again with the common heading prefix.
4. Every chunk's exact token count is checked; one over ``max_tokens`` is split
   again, so ``token_count <= max_tokens`` always holds.

Chunks are contiguous slices of the body (leading blank lines and trailing
whitespace trimmed), so their texts together cover every non-whitespace character.

A heading names its chunks by at most ``max_heading_chars`` characters (``[limits]``,
300 by default; ``cap_heading``): a longer one stays whole in the text, and only its
start goes into heading paths, anchors and the embedder's context line. A 5 MB
one-line note starting with ``# `` otherwise copied its 5 MB heading into every one
of its thousands of chunks.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

from markdown_it.token import Token

from rag_sources.formats.markdown import ParsedNote, block_tokens, line_offsets

__all__ = [
    "CHUNKER_VERSION",
    "MAX_HEADING_CHARS",
    "MAX_HEADING_DEPTH",
    "Chunk",
    "CountTokens",
    "cap_heading",
    "cap_heading_path",
    "chunk_note",
    "chunk_sections",
    "heading_anchor",
]

# Bump whenever the chunk boundaries or embed texts can change for the same input.
from rag_sources.limits import DEFAULT_LIMITS
from rag_sources.versions import CHUNKER_VERSION

CountTokens = Callable[[Sequence[str]], list[int]]

_CONTEXT_SEPARATOR = " > "
_BLANK_PREFIX = re.compile(r"(?:[ \t]*\n)+")
_SENTENCE_END = re.compile(r"[.!?\u3002\uff01\uff1f]+[\"'\u201d\u2019)\]]*[ \t]+")
_WIKILINK = re.compile(r"!?\[\[([^\[\]|\n]*)(?:\|([^\[\]\n]*))?\]\]")
_ANCHOR_UNSAFE = re.compile(r"%%|\[\[|\]\]|[#|^:\[\]]")

# Characters of one heading kept in heading paths and anchors (``[limits]``).
MAX_HEADING_CHARS = DEFAULT_LIMITS.max_heading_chars
# Headings kept in one heading path: Markdown nests six deep; a parser's outline (a
# PDF's bookmarks) may nest thousands deep, each level stored with every chunk.
MAX_HEADING_DEPTH = 32

# refinement levels for a span over max_tokens
_NESTED, _LINES, _SENTENCES, _TOKENS = 1, 2, 3, 4


@dataclass(frozen=True)
class Chunk:
    """One chunk of a note."""

    ordinal: int
    heading_path: list[str]
    text: str
    embed_text: str
    line_start: int
    line_end: int
    token_count: int
    anchor: str = ""  # the section's anchor ("page=6"); "" for a heading-anchored chunk
    # Filterable "name:value" pairs of this chunk alone ("symbol:Client.retry",
    # "symbol_kind:method"), added to its document's facets when it is served.
    facets: tuple[str, ...] = ()


def cap_heading(text: str, limit: int = MAX_HEADING_CHARS) -> str:
    """``text`` on one line, cut to at most ``limit`` characters (at a space when one
    is in its second half, so words stay whole); the start of a longer heading."""
    if len(text) > 4 * limit:  # only the start is read: a heading may be megabytes
        text = text[: 4 * limit]
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", limit // 2, limit + 1)
    return text[: cut if cut > 0 else limit].rstrip()


def cap_heading_path(path: Sequence[str], limit: int = MAX_HEADING_CHARS) -> tuple[str, ...]:
    """A heading path with each heading capped (``cap_heading``), empty ones dropped,
    and at most ``MAX_HEADING_DEPTH`` of them."""
    capped = (cap_heading(p, limit) for p in path[:MAX_HEADING_DEPTH])
    return tuple(p for p in capped if p)


def heading_anchor(heading_path: list[str], limit: int = MAX_HEADING_CHARS) -> str:
    """Obsidian-style heading anchor, e.g. ``"Install#On Linux"`` ('' for no heading);
    each heading capped at ``limit`` characters.

    Characters that cannot appear in an Obsidian link (``# | ^ : %% [[ ]]``) are
    replaced by spaces, as Obsidian does when it writes a link to a heading.
    """
    parts = [
        " ".join(_ANCHOR_UNSAFE.sub(" ", cap_heading(p, limit)).split())
        for p in heading_path[:MAX_HEADING_DEPTH]
    ]
    return "#".join(p for p in parts if p)


def _context(path: Sequence[str]) -> str:
    return _CONTEXT_SEPARATOR.join(p for p in path if p)


def _embed(context: str, text: str) -> str:
    return f"{context}\n\n{text}" if context else text


def _trim(text: str) -> tuple[int, str]:
    """Drop leading blank lines and trailing whitespace; (characters dropped in front, text)."""
    text = text.rstrip()
    m = _BLANK_PREFIX.match(text)
    skip = m.end() if m else 0
    return skip, text[skip:]


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _heading_text(children: Sequence[Token], limit: int = MAX_HEADING_CHARS) -> str:
    """Plain text of a heading's inline tokens (emphasis, code and link markup
    dropped), capped at ``limit`` characters (``cap_heading``)."""
    parts: list[str] = []
    for child in children:
        if child.type in ("text", "code_inline", "image"):  # an image's content is its alt
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    text = "".join(parts)
    text = _WIKILINK.sub(lambda m: (m.group(2) or m.group(1)).strip(), text)
    return cap_heading(text, limit)


@dataclass
class _Section:
    path: tuple[str, ...]
    start: int  # character offsets in the body
    end: int
    heading_end: int  # end of the heading line(s); == start for the preamble
    block_starts: list[int] = field(default_factory=list)  # top-level block lines


@dataclass
class _Unit:
    path: tuple[str, ...]
    start: int
    end: int
    tokens: int  # tokens of the text alone (embed count minus context count)


class _Chunker:
    def __init__(
        self,
        note: ParsedNote,
        count_tokens: CountTokens,
        target: int,
        maximum: int,
        base_path: tuple[str, ...] = (),
        max_heading_chars: int = MAX_HEADING_CHARS,
        title: str = "",
    ) -> None:
        self.body = note.body
        self.title = cap_heading(title, max_heading_chars)
        self.first_line = note.body_start_line
        self.base_path = base_path
        self.count_tokens = count_tokens
        self.target = target
        self.max = maximum
        self.heading_chars = max_heading_chars
        self.starts = line_offsets(self.body)
        tokens = block_tokens(self.body, max_heading_chars)
        # The first lines of the note's block tokens, sorted, without repeats.
        self.token_lines = sorted({tok.map[0] for tok in tokens if tok.map is not None})
        # Only top-level tokens and heading texts are read later (by ``sections``):
        # the others go now, so that a 20 MB note's 700,000 tokens are not kept
        # through its chunking.
        self.tokens = [
            tok
            for i, tok in enumerate(tokens)
            if tok.level == 0 or (i and tokens[i - 1].type == "heading_open")
        ]
        self._context_cache: dict[tuple[str, ...], tuple[str, int]] = {}

    # ---- helpers -------------------------------------------------------------

    def offset(self, line: int) -> int:
        return self.starts[line] if line < len(self.starts) else len(self.body)

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def clean(self, start: int, end: int) -> tuple[int, str]:
        """Trimmed text of a span and the offset where it begins."""
        skip, text = _trim(self.body[start:end])
        return start + skip, text

    def count(self, texts: Sequence[str]) -> list[int]:
        return list(self.count_tokens(texts)) if texts else []

    def prime_contexts(self, paths: Sequence[tuple[str, ...]]) -> None:
        """Count the context lines of many heading paths in one tokenizer call."""
        todo = sorted({p for p in paths if p not in self._context_cache})
        texts = [_context(self.titled(p)) for p in todo]
        for path, text, n in zip(todo, texts, self.count(texts), strict=True):
            if n <= self.max // 2:
                self._context_cache[path] = (text, n if text else 0)

    def titled(self, path: tuple[str, ...]) -> tuple[str, ...]:
        """The labels of a chunk's context line: the document's title (when it is given
        and is not already the first heading), then its heading path."""
        if not self.title or (path and path[0].casefold() == self.title.casefold()):
            return path
        return (self.title, *path)

    def context(self, path: tuple[str, ...]) -> tuple[str, int]:
        """Context line for a heading path and its token count (kept under max/2)."""
        if path not in self._context_cache:
            labels = self.titled(path)
            text = _context(labels)
            n = self.count([text])[0] if text else 0
            budget = self.max // 2
            if n > budget and len(labels) > 1:
                text = _context(self.titled(path[-1:]))
                n = self.count([text])[0]
            if n > budget:
                end = self.longest_prefix(text, 0, len(text), "", budget)
                text = text[:end].rstrip()
                n = self.count([text])[0] if text else 0
            self._context_cache[path] = (text, n)
        return self._context_cache[path]

    def fits(self, context: str, text: str, limit: int) -> bool:
        return self.count([_embed(context, _trim(text)[1])])[0] <= limit

    def longest_prefix(self, text: str, start: int, end: int, context: str, limit: int) -> int:
        """Largest p in (start, end] whose text[start:p] fits ``limit`` (at least start+1)."""
        # gallop from a short probe (about 4 characters per token), so that a long
        # line costs O(length) tokenizer work, not O(length^2)
        lo, probe = start + 1, min(end, start + 4 * limit)
        while self.fits(context, text[start:probe], limit):
            if probe == end:
                return end
            lo, probe = probe, min(end, start + 2 * (probe - start))
        hi = probe  # does not fit
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.fits(context, text[start:mid], limit):
                lo = mid
            else:
                hi = mid
        # snap back to whitespace in the second half of the piece, so words stay whole
        half = start + (lo - start) // 2
        cut = max(text.rfind(" ", half, lo), text.rfind("\n", half, lo), text.rfind("\t", half, lo))
        return cut + 1 if cut >= half and cut + 1 > start else lo

    # ---- sections --------------------------------------------------------------

    def sections(self) -> list[_Section]:
        base = self.base_path
        sections: list[_Section] = [_Section(base, 0, len(self.body), 0)]
        stack: list[tuple[int, str]] = []
        tokens = self.tokens
        for i, tok in enumerate(tokens):
            if tok.level != 0 or tok.map is None or tok.nesting == -1:
                continue
            if tok.type == "heading_open":
                level = int(tok.tag[1:])
                inline = tokens[i + 1] if i + 1 < len(tokens) else None
                text = (
                    _heading_text(inline.children or [], self.heading_chars)
                    if inline is not None
                    else ""
                )
                while stack and stack[-1][0] >= level:
                    stack.pop()
                if text:
                    stack.append((level, text))
                begin = self.offset(tok.map[0])
                sections[-1].end = begin
                sections.append(
                    _Section(
                        _join_paths(base, tuple(t for _, t in stack)),
                        begin,
                        len(self.body),
                        self.offset(tok.map[1]),
                        [tok.map[0]],
                    )
                )
            else:
                sections[-1].block_starts.append(tok.map[0])
        # fold a section that holds only its heading into the next one
        out: list[_Section] = []
        carry: _Section | None = None
        for index, sec in enumerate(sections):
            if not self.body[sec.start : sec.end].strip():
                continue
            if carry is not None:
                sec.start = carry.start
                sec.block_starts = carry.block_starts + sec.block_starts
                carry = None
            heading_only = not self.body[sec.heading_end : sec.end].strip()
            if heading_only and sec.path != base and index < len(sections) - 1:
                carry = sec
                continue
            out.append(sec)
        if carry is not None:
            out.append(carry)
        return out

    # ---- splitting ---------------------------------------------------------

    def block_spans(self, sec: _Section) -> list[tuple[int, int]]:
        bounds = sorted({self.offset(n) for n in sec.block_starts})
        # the heading stays with the first block after it
        content = [b for b in bounds if sec.heading_end <= b < sec.end]
        return list(pairwise([sec.start, *content[1:], sec.end]))

    def split(
        self, start: int, end: int, level: int, context: str
    ) -> tuple[list[tuple[int, int]], int]:
        """Cut a span into finer pieces; returns (pieces, level used)."""
        while level <= _TOKENS:
            bounds: list[int] = []
            if level == _NESTED:
                first, last = self.line_of(start), self.line_of(max(start, end - 1))
                # Only the block starts inside the span: a scan of every token per cut
                # made one 20 MB note take 15 minutes (quadratic in the note's size).
                lines = self.token_lines
                inside = lines[bisect_right(lines, first) : bisect_right(lines, last)]
                bounds = sorted({self.offset(n) for n in inside})
            elif level == _LINES:
                first, last = self.line_of(start), self.line_of(max(start, end - 1))
                bounds = [self.starts[n] for n in range(first + 1, last + 1)]
            elif level == _SENTENCES:
                bounds = [m.end() for m in _SENTENCE_END.finditer(self.body, start, end)]
            else:
                pieces: list[tuple[int, int]] = []
                pos = start
                while pos < end:
                    nxt = self.longest_prefix(self.body, pos, end, context, self.target)
                    pieces.append((pos, nxt))
                    pos = nxt
                return pieces, level
            bounds = [b for b in bounds if start < b < end]
            if bounds:
                edges = [start, *bounds, end]
                return list(pairwise(edges)), level
            level += 1
        raise AssertionError("unreachable")  # pragma: no cover

    def fit(self, spans: list[tuple[int, int]], path: tuple[str, ...], level: int) -> list[_Unit]:
        """Refine spans until each one's embed text fits max_tokens."""
        context, context_tokens = self.context(path)
        texts = [_embed(context, self.clean(s, e)[1]) for s, e in spans]
        counts = self.count(texts)
        units: list[_Unit] = []
        for (s, e), n in zip(spans, counts, strict=True):
            if n <= self.max or e - s <= 1:
                units.append(_Unit(path, s, e, max(n - context_tokens, 0)))
            elif level >= _TOKENS:  # only for tokenizers where a shorter text is not shorter
                mid = (s + e) // 2
                units.extend(self.fit([(s, mid), (mid, e)], path, _TOKENS))
            else:
                pieces, used = self.split(s, e, level + 1, context)
                units.extend(self.fit(pieces, path, used))
        return units

    def pack(self, units: list[_Unit], path: tuple[str, ...]) -> list[list[_Unit]]:
        """Greedy packing of consecutive units up to target_tokens (estimated)."""
        groups: list[list[_Unit]] = []
        current: list[_Unit] = []
        current_path = path
        total = 0
        for unit in units:
            new_path = _common_prefix(current_path, unit.path) if current else unit.path
            estimate = self.context(new_path)[1] + total + unit.tokens
            if current and estimate > self.target:
                groups.append(current)
                current, total, new_path = [], 0, unit.path
            current.append(unit)
            current_path = new_path
            total += unit.tokens
        if current:
            groups.append(current)
        return groups

    # ---- driver --------------------------------------------------------------

    def run(self) -> list[Chunk]:
        if not self.body.strip():
            return []
        sections = self.sections()
        self.prime_contexts([sec.path for sec in sections])
        whole_texts = []
        for sec in sections:
            context, _ = self.context(sec.path)
            whole_texts.append(_embed(context, self.clean(sec.start, sec.end)[1]))
        whole_counts = self.count(whole_texts)

        groups: list[list[_Unit]] = []
        pending: list[_Unit] = []  # consecutive whole sections, merged later
        for sec, n in zip(sections, whole_counts, strict=True):
            if n <= self.target:
                pending.append(_Unit(sec.path, sec.start, sec.end, n - self.context(sec.path)[1]))
                continue
            groups.extend(self.pack(pending, ()))
            pending = []
            units = self.fit(self.block_spans(sec), sec.path, 0)
            groups.extend(self.pack(units, sec.path))
        groups.extend(self.pack(pending, ()))
        return self.finish(self.merge_adjacent(groups))

    def estimate(self, group: list[_Unit]) -> int:
        path = group[0].path
        for unit in group[1:]:
            path = _common_prefix(path, unit.path)
        return self.context(path)[1] + sum(unit.tokens for unit in group)

    def merge_adjacent(self, groups: list[list[_Unit]]) -> list[list[_Unit]]:
        """Merge neighbouring groups that fit target_tokens together (e.g. a small
        section after the last piece of a large one)."""
        merged: list[list[_Unit]] = []
        for group in groups:
            if merged and self.estimate(merged[-1] + group) <= self.target:
                merged[-1] = merged[-1] + group
            else:
                merged.append(group)
        return merged

    def finish(self, groups: list[list[_Unit]]) -> list[Chunk]:
        todo = [g for g in groups if self.clean(g[0].start, g[-1].end)[1]]
        while True:
            built = [self.build(g) for g in todo]
            counts = self.count([embed for embed, *_ in built])
            over = {i for i, n in enumerate(counts) if n > self.max}
            if not over:
                break
            again: list[list[_Unit]] = []
            for i, group in enumerate(todo):
                if i not in over:
                    again.append(group)
                elif len(group) > 1:
                    half = len(group) // 2
                    again.extend([group[:half], group[half:]])
                else:  # a single unit that the estimate let through: cut at tokens
                    unit = group[0]
                    if unit.end - unit.start <= 1:
                        raise ValueError(
                            f"a single character needs more than max_tokens={self.max} tokens"
                        )
                    context = self.context(unit.path)[0]
                    pieces, _ = self.split(unit.start, unit.end, _TOKENS, context)
                    if pieces == [(unit.start, unit.end)]:
                        mid = (unit.start + unit.end) // 2
                        pieces = [(unit.start, mid), (mid, unit.end)]
                    again.extend([[u] for u in self.fit(pieces, unit.path, _TOKENS)])
            todo = again
        chunks = []
        for ordinal, ((embed, path, text, start, end), n) in enumerate(
            zip(built, counts, strict=True)
        ):
            chunks.append(
                Chunk(
                    ordinal=ordinal,
                    heading_path=list(path),
                    text=text,
                    embed_text=embed,
                    line_start=self.line_of(start) + self.first_line,
                    line_end=self.line_of(end) + self.first_line,
                    token_count=n,
                )
            )
        return chunks

    def build(self, group: list[_Unit]) -> tuple[str, tuple[str, ...], str, int, int]:
        path = group[0].path
        for unit in group[1:]:
            path = _common_prefix(path, unit.path)
        begin, text = self.clean(group[0].start, group[-1].end)
        context = self.context(path)[0]
        return _embed(context, text), path, text, begin, begin + max(len(text) - 1, 0)


def chunk_note(
    note: ParsedNote,
    count_tokens: CountTokens,
    target_tokens: int,
    max_tokens: int,
    max_heading_chars: int = MAX_HEADING_CHARS,
    title: str = "",
) -> list[Chunk]:
    """Cut a note's body into heading-aware chunks of at most ``max_tokens`` tokens.

    ``count_tokens`` is the embedder's tokenizer (token counts without special
    tokens); chunks aim at ``target_tokens`` and never exceed ``max_tokens``. An
    empty body gives no chunks. Deterministic: same note, same chunks. Headings
    name chunks by at most ``max_heading_chars`` characters (the source's limit). A
    ``title`` leads each chunk's context line (what is embedded), not its heading path.
    """
    _check_budget(target_tokens, max_tokens)
    return _Chunker(
        note, count_tokens, target_tokens, max_tokens, max_heading_chars=max_heading_chars,
        title=title,
    ).run()  # fmt: skip


def _join_paths(base: tuple[str, ...], inner: tuple[str, ...]) -> tuple[str, ...]:
    """A section's heading path inside a part whose own path is ``base`` (a heading
    that repeats the part's last heading, as a PDF page's title does, is not doubled)."""
    if base and inner and inner[0].casefold() == base[-1].casefold():
        inner = inner[1:]
    return base + inner


def chunk_sections(
    body: str,
    body_start_line: int,
    sections: Sequence[Any],
    count_tokens: CountTokens,
    target_tokens: int,
    max_tokens: int,
    max_heading_chars: int = MAX_HEADING_CHARS,
    title: str = "",
) -> list[Chunk]:
    """Chunks of a document body: with no sections, by headings (``chunk_note``); else
    each section (page, slide, chapter) on its own, so every chunk cites one of them.

    A section's ``heading_path`` (capped: ``cap_heading_path``) encloses the headings
    found inside it, and its ``anchor`` becomes each of its chunks' anchor. Sections
    with ``embed`` off give no chunks.
    """
    if not sections:
        note = _note(body, body_start_line)
        return chunk_note(note, count_tokens, target_tokens, max_tokens, max_heading_chars, title)
    _check_budget(target_tokens, max_tokens)
    lines = body.split("\n")
    chunks: list[Chunk] = []
    for section in sections:
        if not getattr(section, "embed", True):
            continue  # shown with the document, not searched (a mail's quoted reply)
        first = section.line_start - body_start_line
        text = "\n".join(lines[max(first, 0) : section.line_end - body_start_line + 1])
        base = cap_heading_path(section.heading_path, max_heading_chars)
        chunker = _Chunker(
            _note(text, section.line_start), count_tokens, target_tokens, max_tokens, base,
            max_heading_chars, title,
        )  # fmt: skip
        for piece in chunker.run():
            chunks.append(replace(piece, ordinal=len(chunks), anchor=section.anchor))
    return chunks


def _note(body: str, body_start_line: int) -> ParsedNote:
    return ParsedNote(
        path="", title="", aliases=[], tags=[], links=[], created=None, updated=None,
        frontmatter={}, body=body, body_start_line=body_start_line, warnings=[],
    )  # fmt: skip


def _check_budget(target_tokens: int, max_tokens: int) -> None:
    if max_tokens < 8:
        raise ValueError(f"max_tokens must be at least 8, got {max_tokens}")
    if not 0 < target_tokens <= max_tokens:
        raise ValueError(
            f"target_tokens must be in 1..max_tokens ({max_tokens}), got {target_tokens}"
        )
