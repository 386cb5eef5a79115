"""Syntax-aware chunks of a source file: one per definition, measured in the embedder's tokens.

How a file becomes chunks:

1. tree-sitter parses it (with a time limit); the definitions (functions, methods,
   classes, structs, traits, impls, modules, namespaces ...) are found per language
   (``symbols.py``), each with its leading comments, decorators and attributes.
2. The file's rows are laid out as definitions and the code between them (imports,
   constants, module-level statements), so every row belongs to exactly one piece
   (``layout.py``). A function that fits ``maximum`` and a class/module/impl that fits
   ``target`` are one piece each; a bigger class becomes its own header piece
   (signature, fields, small code) plus one piece per member, recursively; a bigger
   function is cut at statement boundaries: the children of its node, then of its
   largest child, and so on down to single lines, packed up to ``target`` as
   ``(part k)`` pieces.
3. Neighbouring pieces are grouped: small ones (under ``target/4`` tokens) join a
   neighbour while the group fits ``target``; tiny ones (under ``target/10``) and a
   closing ``}``/``end`` line join while it fits ``maximum``.
4. Each chunk's embed text is a context line, ``path · language · class A · method b``,
   then the code. Every embed text is counted exactly (in batches); one over
   ``maximum`` is split again (pieces, lines, then characters of a single line), so
   ``token_count <= maximum`` always holds.

Token counts of single lines are taken once per distinct line (one tokenizer call) and
summed for the estimates; the exact counts come from a second call on the embed texts.
A file in an unknown language, one whose parse fails or times out, or one whose lines
are mostly in ERROR nodes and outside the definitions found (while those hold under a
quarter of its lines) is cut into line windows of about ``target`` tokens, at blank
lines where possible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from tree_sitter import Node

from rag_sources.chunking import Chunk, CountTokens, _check_budget
from rag_sources.code.languages import CODE_LANGUAGES, parse
from rag_sources.code.layout import SEPARATOR, Layout, Piece
from rag_sources.code.symbols import CodeSymbol, Definition, definitions, mostly_errors

__all__ = ["CODE_CHUNKER_VERSION", "chunk_code", "code_symbols"]

# Bump whenever the chunk boundaries or embed texts can change for the same input.
CODE_CHUNKER_VERSION = "code-ts-1"

_MAX_LISTED = 6  # symbols named in a grouped chunk's context line


@dataclass
class _Built:
    embed: str
    text: str
    header: str
    start_row: int
    end_row: int
    heading: list[str]
    facets: tuple[str, ...]


def chunk_code(
    text: str,
    language: str | None,
    path: str,
    count_tokens: CountTokens,
    target: int,
    maximum: int,
    first_line: int = 1,
    *,
    problems: list[str] | None = None,
) -> list[Chunk]:
    """Cut a source file into syntax-aware chunks of at most ``maximum`` tokens.

    ``language`` is one of ``CODE_LANGUAGES`` (else line windows); ``path`` is shown
    in each chunk's context line; ``first_line`` is the file line of ``text``'s first
    line. A parse that fails or times out appends a one-line reason to ``problems``
    and falls back to line windows. Deterministic: same input, same chunks.
    """
    _check_budget(target, maximum)
    if not text.strip():
        return []
    chunker = _CodeChunker(text, language, path, count_tokens, target, maximum, first_line)
    chunks = chunker.run()
    if problems is not None and chunker.problem:
        problems.append(chunker.problem)
    return chunks


def code_symbols(text: str, language: str | None, first_line: int = 1) -> list[CodeSymbol]:
    """Every definition of a source file in file order, nested ones included, with
    1-based lines (leading comments/decorators included); [] if it does not parse."""
    if language not in CODE_LANGUAGES or not text.strip():
        return []
    source = text.encode("utf-8", "replace")
    tree = parse(source, language)
    if tree is None:
        return []
    rows = [bool(line.strip()) for line in text.split("\n")]
    defs = definitions(tree.root_node, language, source)
    if mostly_errors(tree.root_node, rows, defs):
        return []
    found: list[CodeSymbol] = []
    for top in defs:
        for d in top.walk():
            found.append(
                CodeSymbol(d.kind, d.qualified, d.short, d.start + first_line, d.end + first_line)
            )
    return found


def parse_problem(text: str, language: str) -> str | None:
    """Why ``chunk_code`` will cut this file into line windows (it does not parse, in
    time or mostly), on one line without the path; None when it parses."""
    if language not in CODE_LANGUAGES or not text.strip():
        return None
    source = text.encode("utf-8", "replace")
    tree = parse(source, language)
    if tree is None:
        return f"the {language} parser failed or ran out of time; indexed as line windows"
    rows = [bool(line.strip()) for line in text.split("\n")]
    if mostly_errors(tree.root_node, rows, definitions(tree.root_node, language, source)):
        return f"{language} syntax errors in most lines; indexed as line windows"
    return None


class _CodeChunker(Layout):
    def run(self) -> list[Chunk]:
        last = len(self.lines) - 1
        found = self.parse()
        if found is None:
            self.prime([])
            budget = max(self.target - self.header_est(None), 1)
            pieces = [self.piece(s, e, None) for s, e in self.line_units(0, last, budget)]
        else:
            defs, top_nodes = found
            self.prime(defs)
            pieces = self.layout(defs, 0, last, None, top_nodes)
        return self.finish(self.group([p for p in pieces if p is not None]))

    def parse(self) -> tuple[list[Definition], list[Node]] | None:
        if self.language is None:
            return None
        source = self.text.encode("utf-8", "replace")
        tree = parse(source, self.language)
        if tree is None:
            self.problem = (
                f"{self.path}: the {self.language} parser failed or ran out of time; "
                "indexed as line windows, without symbols"
            )
            return None
        root = tree.root_node
        defs = definitions(root, self.language, source)
        if mostly_errors(root, self.filled, defs):
            self.problem = (
                f"{self.path}: {self.language} syntax errors in most lines; "
                "indexed as line windows, without symbols"
            )
            return None
        return defs, root.named_children

    def finish(self, groups: list[list[Piece]]) -> list[Chunk]:
        while True:
            described = [self.describe(g) for g in groups]
            headers = self.headers([labels for _, labels in described])
            built = [
                self.build(g, heading, header)
                for g, (heading, _), header in zip(groups, described, headers, strict=True)
            ]
            self.count([b.embed for b in built])
            if all(self.counts[b.embed] <= self.max for b in built):
                break
            again: list[list[Piece]] = []
            for g, b in zip(groups, built, strict=True):
                if self.counts[b.embed] <= self.max:
                    again.append(g)
                else:
                    again.extend(self.resplit(g, self.counts[b.header]))
            groups = again
        chunks = []
        for ordinal, b in enumerate(built):
            line_start, line_end = b.start_row + self.first_line, b.end_row + self.first_line
            chunks.append(
                Chunk(
                    ordinal=ordinal,
                    heading_path=b.heading,
                    text=b.text,
                    embed_text=b.embed,
                    line_start=line_start,
                    line_end=line_end,
                    token_count=self.counts[b.embed],
                    anchor=f"L{line_start}-L{line_end}",
                    facets=b.facets,
                )
            )
        return chunks

    def resplit(self, g: list[Piece], header_tokens: int) -> list[list[Piece]]:
        """Smaller groups for a group whose embed text is over ``maximum``."""
        if len(g) > 1:
            half, best = 1, math.inf
            total = sum(p.tokens for p in g)
            running = 0
            for i, p in enumerate(g[:-1], 1):
                running += p.tokens
                if abs(total - 2 * running) < best:
                    half, best = i, abs(total - 2 * running)
            return [g[:half], g[half:]]
        (p,) = g
        budget = max(self.max - header_tokens - 1, 1)
        flags = {"whole": p.whole, "part": p.part}
        if p.cols is None and p.start < p.end:
            rows = self.line_units(p.start, p.end, budget)
            if len(rows) == 1:  # the estimate fit, the exact count did not: halve
                mid = (p.start + p.end) // 2
                rows = [(p.start, mid), (mid + 1, p.end)]
            out = [self.piece(s, e, p.owner, **flags) for s, e in rows]
            pieces = [x for x in out if x is not None]
            pieces[0].extra = p.extra
            return [[x] for x in pieces]
        return [[x] for x in self.split_row(p, budget)]

    def split_row(self, p: Piece, budget: int) -> list[Piece]:
        """Slices of one over-long row (minified code), cut at spaces where possible."""
        line = self.lines[p.start]
        lo, hi = p.cols if p.cols is not None else (0, len(line))
        if hi - lo <= 1:
            raise ValueError(f"one character needs more than maximum={self.max} tokens")
        self.count([line[lo:hi]])
        parts = max(2, math.ceil(self.counts[line[lo:hi]] / max(budget * 0.8, 1)))
        step = (hi - lo) / parts
        cuts = [lo]
        for k in range(1, parts):
            at = lo + round(k * step)
            space = line.rfind(" ", max(cuts[-1] + 1, at - int(step / 4)), at)
            cuts.append(space + 1 if space > cuts[-1] else at)
        cuts.append(hi)
        out = []
        for s, e in pairwise(cuts):
            s += len(line[s:e]) - len(line[s:e].lstrip())
            e -= len(line[s:e]) - len(line[s:e].rstrip())
            if s < e:
                out.append(Piece(p.start, p.start, p.owner, 0, p.whole, p.part, cols=(s, e)))
        out[0].extra = p.extra
        return out

    def build(self, g: list[Piece], heading: list[str], header: str) -> _Built:
        first, last = g[0], g[-1]
        begin = self.offsets[first.start] + (first.cols[0] if first.cols else 0)
        if last.cols:
            end = self.offsets[last.end] + last.cols[1]
        else:
            end = self.offsets[last.end] + len(self.lines[last.end].rstrip("\r"))
        text = self.text[begin:end]
        facets: list[str] = []
        for p in _named_pieces(g):
            named: list[Definition] = []
            if p.owner is not None:
                named.extend(p.owner.walk() if p.whole else [p.owner])
            for d in p.extra:
                named.extend(d.walk())
            for d in named:
                facets.extend(f for f in d.facets() if f not in facets)
        embed = f"{header}\n{text}" if header else text
        return _Built(embed, text, header, first.start, last.end, heading, tuple(facets))

    def describe(self, g: list[Piece]) -> tuple[list[str], list[str]]:
        """The heading path and the context labels of a group."""
        named = _named_pieces(g)
        # code between members (a field, an #ifdef) does not rename a method's chunk;
        # a class's header does
        defining = [
            p
            for p in named
            if p.owner is not None and (p.whole or p.part or p.start <= p.owner.start)
        ]
        owners: list[Definition] = []
        for p in defining or named:
            if p.owner is not None and all(p.owner is not o for o in owners):
                owners.append(p.owner)
        if not owners:
            return [], []
        if len(owners) == 1:
            (o,) = owners
            suffix = _part_suffix(g, o)
            labels = [d.label for d in o.lineage()]
            labels[-1] += suffix
            return [o.heading + suffix], labels
        common = owners[0].lineage()
        for o in owners[1:]:
            chain = o.lineage()
            n = 0
            while n < min(len(common), len(chain)) and common[n] is chain[n]:
                n += 1
            common = common[:n]
        rest: list[str] = []
        for o in owners:
            label = o.label + _part_suffix(g, o)
            if all(o is not c for c in common) and label not in rest:
                rest.append(label)
        listed = ", ".join(rest[:_MAX_LISTED]) + (", …" if len(rest) > _MAX_LISTED else "")
        labels = [d.label for d in common] + ([listed] if listed else [])
        return ([common[-1].heading] if common else []), labels

    def headers(self, label_lists: list[list[str]]) -> list[str]:
        """The context lines, each within a quarter of ``maximum`` tokens: one over it
        keeps only the file's name, then is cut short (a few batched counts in all)."""
        headers = [SEPARATOR.join([self.base, *labels]) for labels in label_lists]
        self.count(headers)
        over = [i for i, h in enumerate(headers) if self.counts[h] > self.header_cap]
        if over:
            name = self.base.split(SEPARATOR, 1)[0].rsplit("/", 1)[-1]
            short_base = SEPARATOR.join([name, self.language]) if self.language else name
            for i in over:
                headers[i] = SEPARATOR.join([short_base, *label_lists[i]])
            self.count([headers[i] for i in over])
        for _ in range(8):
            over = [i for i in over if self.counts[headers[i]] > self.header_cap]
            if not over:
                break
            for i in over:
                h = headers[i]
                keep = int(len(h) * self.header_cap / self.counts[h] * 0.9)
                headers[i] = h[: max(keep, 0)].rstrip()
            self.count([headers[i] for i in over])
        return headers


def _part_suffix(g: list[Piece], owner: Definition) -> str:
    """ " (part k)" or " (parts j-k)" when the group holds only parts of ``owner``."""
    parts = sorted({p.part for p in g if p.owner is owner})
    if parts[0] == 0:
        return ""
    return f" (part {parts[0]})" if len(parts) == 1 else f" (parts {parts[0]}-{parts[-1]})"


def _named_pieces(g: list[Piece]) -> list[Piece]:
    """The pieces that name a group: a closing ``}`` line of a class that joined the
    last method's chunk does not make it a chunk of the class."""
    named = [p for p in g if not p.closer]
    return named or g
