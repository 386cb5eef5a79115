"""Cutting a note's indexed body by file line numbers or by section (heading).

``documents.body`` is the note without its YAML frontmatter; its first line is line
``body_start_line`` of the file, so every line keeps the number it has in the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt

from rag_sources.errors import RaglineError


class RangeError(RaglineError):
    """A requested line range or section does not exist in the note."""


@dataclass(frozen=True)
class Section:
    path: tuple[str, ...]  # heading path, outermost first
    level: int
    line_start: int  # file line of the heading
    line_end: int  # last file line before the next heading of the same or higher level

    @property
    def title(self) -> str:
        return " > ".join(self.path)


@dataclass(frozen=True)
class Excerpt:
    line_start: int
    line_end: int
    text: str
    truncated: bool
    section: str | None
    # Where the rest starts when the character cap cut a line short (else None).
    next_line: int | None = None
    next_char: int | None = None


@dataclass(frozen=True)
class Part:
    """An anchored part of a document's body: a page, slide, sheet or chapter."""

    anchor: str  # "page=6"
    label: str  # "Page 6"
    line_start: int
    line_end: int


@dataclass(frozen=True)
class Body:
    """A note's indexed body with file line numbers, and its parts if it has any."""

    text: str
    first_line: int
    parts: tuple[Part, ...] = ()

    @classmethod
    def of(cls, text: str, first_line: int, sections_json: str | None) -> Body:
        raw = json.loads(sections_json or "[]")
        parts = tuple(
            Part(
                str(r["anchor"]), str(r.get("label") or r["anchor"]), r["line_start"], r["line_end"]
            )
            for r in raw
        )
        return cls(text, first_line, parts)

    @property
    def lines(self) -> list[str]:
        lines = self.text.split("\n")
        if len(lines) > 1 and lines[-1] == "":
            lines.pop()  # the file's final newline
        return lines

    @property
    def last_line(self) -> int:
        return self.first_line + len(self.lines) - 1

    def choose_range(
        self,
        start_line: int | None,
        end_line: int | None,
        section: str | None,
        chunk: tuple[int, int, str | None] | None,
    ) -> tuple[int, int, str | None, str | None]:
        """(first line, last line, section title, part anchor) to return: an explicit
        line range, else the section or part, else the part the chunk is on (a page,
        a slide) or the chunk's lines, else the whole body."""
        if start_line is not None or end_line is not None:
            return start_line or self.first_line, end_line or self.last_line, None, None
        if section:
            part = self.part(section)
            if part is not None:
                return part.line_start, part.line_end, part.label, part.anchor
            found = self.section(section)
            return found.line_start, found.line_end, found.title, None
        if chunk is not None:
            part = next((p for p in self.parts if p.line_start <= chunk[0] <= p.line_end), None)
            if part is not None:
                return part.line_start, part.line_end, part.label, part.anchor
            return chunk[0], chunk[1], chunk[2] or None, None
        return self.first_line, self.last_line, None, None

    def fits(self, start: int, end: int, max_lines: int, max_chars: int) -> bool:
        """Whether file lines ``start``..``end`` come back whole under the caps."""
        first, last = max(start, self.first_line), min(end, self.last_line)
        if last - first + 1 > max_lines:
            return False
        lines = self.lines[first - self.first_line : last - self.first_line + 1]
        return sum(len(line) + 1 for line in lines) - 1 <= max_chars

    def part(self, wanted: str) -> Part | None:
        """The part whose anchor ('page=6') or label ('Page 6') is ``wanted``."""
        key = _norm(wanted.lstrip("#"))
        return next((p for p in self.parts if key in (_norm(p.anchor), _norm(p.label))), None)

    def cut(
        self,
        start: int,
        end: int,
        max_lines: int,
        section: str | None = None,
        max_chars: int | None = None,
        start_char: int = 0,
    ) -> Excerpt:
        """File lines ``start``..``end`` (inclusive), at most ``max_lines`` of them and
        ``max_chars`` characters, the first line from its character ``start_char``.

        A line longer than what is left of ``max_chars`` is cut; the excerpt then says
        where the rest starts (``next_line``, ``next_char``)."""
        if end < start:
            raise RangeError(f"end_line {end} is before start_line {start}")
        if start > self.last_line:
            raise RangeError(
                f"start_line {start} is past the end of the note (line {self.last_line})"
            )
        if end < self.first_line:
            raise RangeError(
                f"lines {start}-{end} are the note's frontmatter (its body starts at line "
                f"{self.first_line}); open the note from its start to get `frontmatter`"
            )
        start = max(start, self.first_line)
        end = min(end, self.last_line)
        truncated = end - start + 1 > max_lines
        if truncated:
            end = start + max_lines - 1
        lines = self.lines[start - self.first_line : end - self.first_line + 1]
        if start_char:
            if start_char > len(lines[0]):
                raise RangeError(
                    f"start_char {start_char} is past the end of line {start} "
                    f"({len(lines[0])} characters)"
                )
            lines[0] = lines[0][start_char:]
        if max_chars is None:
            return Excerpt(start, end, "\n".join(lines), truncated, section)
        kept: list[str] = []
        room = max_chars
        for number, line in enumerate(lines, start):
            if len(line) <= room:
                kept.append(line)
                room -= len(line) + 1
                continue
            if kept and room < len(line) // 2:
                # End on a whole line when most of this one would not fit anyway.
                return Excerpt(start, number - 1, "\n".join(kept), True, section, number, 0)
            offset = (start_char if number == start else 0) + max(room, 0)
            kept.append(line[: max(room, 0)])
            return Excerpt(start, number, "\n".join(kept), True, section, number, offset)
        return Excerpt(start, end, "\n".join(kept), truncated, section)

    def sections(self) -> list[Section]:
        """Every heading of the body and the lines its section spans."""
        tokens = _parser().parse(self.text)
        found: list[tuple[int, str, int]] = []  # (level, title, body line)
        for i, token in enumerate(tokens):
            if token.type == "heading_open" and token.map is not None:
                title = " ".join(tokens[i + 1].content.split()) if i + 1 < len(tokens) else ""
                found.append((int(token.tag[1:]), title, token.map[0]))
        sections: list[Section] = []
        stack: list[tuple[int, str]] = []
        for index, (level, title, line) in enumerate(found):
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            end = next((ln for lv, _, ln in found[index + 1 :] if lv <= level), None)
            last = self.first_line + end - 1 if end is not None else self.last_line
            sections.append(
                Section(tuple(t for _, t in stack), level, self.first_line + line, last)
            )
        return sections

    def section(self, wanted: str) -> Section:
        """The section named ``wanted``: a heading, or a path 'A > B' / 'A#B'."""
        parts = [_norm(p) for p in wanted.replace(" > ", "#").split("#") if p.strip()]
        sections = self.sections()
        for section in sections:
            names = [_norm(p) for p in section.path]
            if parts and names[-len(parts) :] == parts:
                return section
        known = ", ".join(
            [repr(s.title) for s in sections[:20]] + [repr(p.anchor) for p in self.parts[:20]]
        )
        raise RangeError(
            f"no section {wanted!r} in this document; its headings and parts: {known or 'none'}"
        )


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark")
