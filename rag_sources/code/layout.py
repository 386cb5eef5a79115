"""Rows of a source file laid out as pieces (definitions and the code between them),
with token estimates, then grouped; ``chunker.py`` turns the groups into chunks.

Every row belongs to exactly one piece: a definition that fits (a function within
``maximum``, a class/module/impl within ``target``) is one piece; a bigger class is
its header plus its members, recursively; a bigger function is cut at statement
boundaries (the children of its node, then of the largest child, down to lines).
Token counts of single lines are taken once per distinct line, in one tokenizer call,
and summed for the estimates.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from rag_sources.chunking import CountTokens
from rag_sources.code.languages import CODE_LANGUAGES
from rag_sources.code.symbols import Definition, first_row, last_row

__all__ = ["SEPARATOR", "Layout", "Piece"]

SEPARATOR = " · "
_CLOSER = re.compile(r"^\s*(?:[)\]};,]+|end|fi|done|esac)\s*(?:(?://|#).*)?$")
_MAX_DEPTH = 200


@dataclass
class Piece:
    start: int  # rows, 0-based, inclusive
    end: int
    owner: Definition | None  # None: module-level code
    tokens: int  # estimated tokens of the text alone
    whole: bool = False  # holds all of owner (so also its members)
    part: int = 0  # k for "part k" of a definition cut at statements
    closer: bool = False  # only closing brackets / `end`
    cols: tuple[int, int] | None = None  # a slice of one over-long row
    extra: list[Definition] = field(default_factory=list)  # defined on a shared row


class Layout:
    """Token estimates, the layout of a file's rows into pieces, and their grouping."""

    def __init__(
        self,
        text: str,
        language: str | None,
        path: str,
        count_tokens: CountTokens,
        target: int,
        maximum: int,
        first_line: int,
    ) -> None:
        self.text = text
        self.language = language if language in CODE_LANGUAGES else None
        self.count_tokens = count_tokens
        self.target = target
        self.max = maximum
        self.first_line = first_line
        self.lines = text.split("\n")
        self.filled = [bool(line.strip()) for line in self.lines]
        self.offsets = [0]
        for line in self.lines[:-1]:
            self.offsets.append(self.offsets[-1] + len(line) + 1)
        self.path = path
        self.base = f"{path}{SEPARATOR}{self.language}" if self.language else path
        self.small = max(target // 4, 1)
        self.tiny = max(target // 10, 1)
        self.header_cap = max(maximum // 4, 1)
        self.problem = ""
        self.counts: dict[str, int] = {}  # exact counts of texts seen (embeds, headers)
        self.label_tokens: dict[int, int] = {}  # id(definition) -> tokens of its label
        # id(sibling list) -> (the list, kept alive so the id stays its own; first rows)
        self._starts: dict[int, tuple[Sequence[Node], list[int]]] = {}

    def count(self, texts: Sequence[str]) -> None:
        """Count the texts not counted yet, in one tokenizer call."""
        todo = sorted({t for t in texts if t not in self.counts})
        if todo:
            self.counts.update(zip(todo, self.count_tokens(todo), strict=True))

    def prime(self, defs: list[Definition]) -> None:
        """One tokenizer call for every distinct line, the base header and the labels."""
        everything = [d for top in defs for d in top.walk()]
        labels = [d.label for d in everything]
        self.count([*(line for line in self.lines if line.strip()), self.base, *labels])
        self.prefix = [0]
        for line, filled in zip(self.lines, self.filled, strict=True):
            self.prefix.append(self.prefix[-1] + (self.counts[line] if filled else 0))
        for d in everything:
            self.label_tokens[id(d)] = self.counts[d.label]

    def est(self, a: int, b: int) -> int:
        return self.prefix[b + 1] - self.prefix[a]

    def header_est(self, owner: Definition | None) -> int:
        tokens = self.counts[self.base] + 1
        if owner is not None:
            tokens += sum(self.label_tokens[id(d)] + 2 for d in owner.lineage())
        return min(tokens, self.header_cap)

    def trim(self, a: int, b: int) -> tuple[int, int] | None:
        while a <= b and not self.filled[a]:
            a += 1
        while b >= a and not self.filled[b]:
            b -= 1
        return (a, b) if a <= b else None

    def piece(self, a: int, b: int, owner: Definition | None, **flags: object) -> Piece | None:
        rows = self.trim(a, b)
        if rows is None:
            return None
        return Piece(rows[0], rows[1], owner, self.est(*rows), **flags)  # type: ignore[arg-type]

    def layout(
        self,
        defs: list[Definition],
        lo: int,
        hi: int,
        owner: Definition | None,
        siblings: Sequence[Node],
    ) -> list[Piece | None]:
        """Pieces covering rows lo..hi: the definitions and the code around them."""
        pieces: list[Piece | None] = []
        cur = lo
        for d in defs:
            start, end = max(d.start, cur), min(d.end, hi)
            if start > end:  # it shares its row(s) with the definition before it
                placed = [p for p in pieces if p is not None]
                if placed:
                    placed[-1].extra.append(d)
                continue
            if start > cur:
                pieces.extend(self.code(cur, start - 1, owner, siblings))
            pieces.extend(self.place(d, start, end))
            cur = end + 1
        if cur <= hi:
            pieces.extend(self.code(cur, hi, owner, siblings))
        return pieces

    def code(
        self, a: int, b: int, owner: Definition | None, siblings: Sequence[Node]
    ) -> list[Piece | None]:
        """Code that is not a definition of its own (imports, fields, statements)."""
        rows = self.trim(a, b)
        if rows is None:
            return []
        a, b = rows
        header = self.header_est(owner)
        if self.est(a, b) + header <= self.target:
            closer = all(_CLOSER.match(self.lines[r]) for r in range(a, b + 1) if self.filled[r])
            return [self.piece(a, b, owner, closer=closer)]
        starts = self.sibling_starts(siblings)
        # siblings are in file order: only those from the one before row a to row b
        lo, hi = max(bisect_right(starts, a) - 1, 0), bisect_right(starts, b)
        nodes = [n for n in siblings[lo:hi] if last_row(n) >= a]
        units = self.units(nodes, a, b, self.max - header, 0)
        return [self.piece(s, e, owner) for s, e in self.pack(units, self.target - header)]

    def sibling_starts(self, siblings: Sequence[Node]) -> list[int]:
        key = id(siblings)
        if key not in self._starts:
            self._starts[key] = (siblings, [first_row(n) for n in siblings])
        return self._starts[key][1]

    def place(self, d: Definition, start: int, end: int) -> list[Piece | None]:
        tokens, header = self.est(start, end), self.header_est(d)
        if d.members and tokens + header > self.target:
            return self.layout(d.members, start, end, d, d.body)
        if tokens + header <= self.max:
            return [self.piece(start, end, d, whole=True)]
        units = self.units([d.node], start, end, self.max - header, 0)
        parts = self.pack(units, self.target - header)
        return [self.piece(s, e, d, part=k) for k, (s, e) in enumerate(parts, 1)]

    def units(
        self, nodes: Sequence[Node], a: int, b: int, budget: int, depth: int
    ) -> list[tuple[int, int]]:
        """Rows a..b cut at the starts of ``nodes`` (statements), each unit within
        ``budget`` tokens where a node can be cut further; lines last."""
        starts = sorted({first_row(n) for n in nodes if a < first_row(n) <= b})
        out: list[tuple[int, int]] = []
        for s, e in zip([a, *starts], [*(x - 1 for x in starts), b], strict=True):
            if self.est(s, e) <= budget:
                out.append((s, e))
                continue
            inside = [
                n
                for n in nodes
                if s <= first_row(n) <= e and last_row(n) > first_row(n) and n.named_child_count
            ]
            if not inside or depth >= _MAX_DEPTH:
                out.extend(self.line_units(s, e, budget))
                continue
            big = max(inside, key=lambda n: min(last_row(n), e) - first_row(n))
            bs, be = first_row(big), min(last_row(big), e)
            if bs > s:
                out.extend(self.line_units(s, bs - 1, budget))
            out.extend(self.units(big.named_children, bs, be, budget, depth + 1))
            if be < e:
                out.extend(self.line_units(be + 1, e, budget))
        return out

    def line_units(self, a: int, b: int, budget: int) -> list[tuple[int, int]]:
        """Rows a..b in windows of about ``budget`` tokens, cut after a blank line in
        the second half of a window where there is one."""
        out: list[tuple[int, int]] = []
        s, total, blank, r = a, 0, -1, a
        line_tokens = self.prefix
        while r <= b:
            t = line_tokens[r + 1] - line_tokens[r]
            if r > s and total + t > budget:
                cut = blank if blank >= s + (r - s) // 2 and blank > s else r - 1
                out.append((s, cut))
                s, blank = cut + 1, -1
                total = self.est(s, r - 1) if s <= r - 1 else 0
                continue
            total += t
            if not self.filled[r]:
                blank = r
            r += 1
        out.append((s, b))
        return out

    def pack(self, units: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for s, e in units:
            if out and self.est(out[-1][0], e) <= limit:
                out[-1] = (out[-1][0], e)
            else:
                out.append((s, e))
        return out

    def group(self, pieces: list[Piece]) -> list[list[Piece]]:
        groups: list[list[Piece]] = []
        total = 0
        for p in pieces:
            if groups:
                together = total + p.tokens + self.group_header(groups[-1] + [p])
                if (
                    (p.closer and together <= self.max)
                    or (together <= self.target and min(total, p.tokens) < self.small)
                    or (together <= self.max and min(total, p.tokens) < self.tiny)
                ):
                    groups[-1].append(p)
                    total += p.tokens
                    continue
            groups.append([p])
            total = p.tokens
        return groups

    def group_header(self, pieces: list[Piece]) -> int:
        owners = {id(p.owner): p.owner for p in pieces if p.owner is not None}
        if not owners:
            return self.header_est(None)
        return max(self.header_est(o) for o in owners.values()) + 3 * (len(owners) - 1)
