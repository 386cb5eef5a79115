"""Parse one Markdown / Obsidian note: frontmatter, tags, links, body.

YAML goes through a ``yaml.SafeLoader`` that also refuses aliases (a few hundred
bytes of nested aliases expand to gigabytes), deep nesting and oversized blocks,
and keeps a value it cannot construct (``2024-13-45``) as text with a warning;
code blocks (fenced and indented) are found
with markdown-it-py so that tags and links inside code are ignored. Obsidian's own
syntax (``[[wikilinks]]``, ``![[embeds]]``, ``#tags``) has no parser library, so it
is matched with regular expressions on a copy of the body in which code, comments
and HTML are blanked out (same length, newlines kept, so offsets map to lines).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote

import yaml
from markdown_it import MarkdownIt
from markdown_it.rules_block.state_block import StateBlock
from markdown_it.rules_core.state_core import StateCore
from markdown_it.token import Token

from rag_sources.config import ATTACHMENT_SUFFIXES
from rag_sources.formats.model import (
    ItemError,
    ItemSkipped,
    Link,
    ParsedDocument,
    ParseOptions,
    json_safe,
)
from rag_sources.limits import DEFAULT_LIMITS

__all__ = [
    "Link",
    "NoteParseError",
    "NoteSkipped",
    "ParsedNote",
    "block_tokens",
    "line_offsets",
    "note_date_from_name",
    "parse_markdown",
    "parse_markdown_document",
    "parse_markdown_file",
]

BINARY_SNIFF_BYTES = 8192
# Frontmatter limits: over any of them the metadata is ignored with a warning and the
# body is still indexed. Obsidian's properties are a few hundred bytes; 100,000
# characters parse in 0.2-1.5 s with the pure-Python loader (a long flow list is the
# worst case; the C loader cannot refuse aliases).
MAX_FRONTMATTER_CHARS = 100_000
MAX_FRONTMATTER_DEPTH = 32
MAX_FRONTMATTER_JSON_CHARS = 200_000
_MAX_VALUE_WARNINGS = 5
# Of a heading line, the characters whose inline markup is parsed, per character of
# heading text kept (``max_heading_chars``): room for the links and emphasis around
# the kept words. The rest of the line is body text that no one reads as a heading.
HEADING_SOURCE_FACTOR = 8
_HEADING_CHARS = "ragline_heading_chars"  # the cap, passed to the parser in ``env``

# A note's own date, first found first: ``date`` names the day a note is about (a
# meeting, a Jekyll or Hugo post), ``published`` the day a clipped page was (ragline's
# clips, Obsidian Web Clipper: its ``created`` is the day of the clip), ``created``
# when it was written.
_CREATED_KEYS = ("date", "published", "created", "created_at", "date created")
# Keys that also serve as flags elsewhere (Jekyll's ``published: false``): a yes/no
# there is passed over in silence.
_FLAG_KEYS = frozenset({"published"})
_UPDATED_KEYS = ("updated", "modified", "last_modified", "updated_at", "date modified")


@dataclass(frozen=True)
class ParsedNote:
    """A parsed note, ready for chunking."""

    path: str
    title: str
    aliases: list[str]
    tags: list[str]
    links: list[Link]
    created: datetime | None
    updated: datetime | None
    frontmatter: dict[str, Any]
    body: str
    body_start_line: int
    warnings: list[str]


class NoteSkipped(Exception):
    """The file is deliberately not indexed; ``str(e)`` is the reason."""


class NoteParseError(Exception):
    """The file cannot be indexed; ``str(e)`` says what is wrong and what to do."""


# ---------------------------------------------------------------------------
# markdown-it helpers (shared with the chunker)


def _heading_inline(state: StateCore) -> None:
    """markdown-it's ``inline`` core rule for headings only: nothing reads the inline
    tokens of other blocks, and for a 20 MB note they took most of a gigabyte. Only
    the start of a long heading is parsed (``HEADING_SOURCE_FACTOR``): a 5 MB heading
    line is a heading of ``max_heading_chars`` and body text."""
    tokens = state.tokens
    limit = state.env.get(_HEADING_CHARS, DEFAULT_LIMITS.max_heading_chars)
    for i, token in enumerate(tokens):
        if token.type == "inline" and i and tokens[i - 1].type == "heading_open":
            if token.children is None:
                token.children = []
            content = token.content[: limit * HEADING_SOURCE_FACTOR]
            state.md.inline.parse(content, state.md, state.env, token.children)


class _Block:
    """A finished block token without what nothing here reads (attrs, meta, content,
    markup), its line range packed in one int: a 20 MB note has 700,000 block tokens."""

    __slots__ = ("_lines", "children", "level", "nesting", "tag", "type")
    content = ""

    def __init__(self, token: Token) -> None:
        self.type = token.type
        self.tag = token.tag
        self.nesting = token.nesting
        self.level = token.level
        self.children = token.children
        lines = token.map
        self._lines = -1 if lines is None else lines[0] << 32 | lines[1]

    @property
    def map(self) -> tuple[int, int] | None:
        """``Token.map``: 0-based ``(first_line, end_line)``, or None."""
        lines = self._lines
        return None if lines < 0 else (lines >> 32, lines & 0xFFFFFFFF)


def _compacting(rule: Callable[..., bool]) -> Callable[..., bool]:
    """A block rule that, once it has made a top-level block, makes the tokens made so
    far ``_Block`` (a heading's ``inline`` token stays whole: its text is parsed later).
    No rule reads the tokens of an earlier top-level block."""

    def run(state: StateBlock, start: int, end: int, silent: bool) -> bool:
        top = state.level == 0 and not silent
        if not rule(state, start, end, silent):
            return False
        if top:
            tokens = state.tokens
            done = state.env.get(_COMPACTED, 0)
            for i in range(done, len(tokens)):
                token = tokens[i]
                if type(token) is Token and not (
                    token.type == "inline" and i and tokens[i - 1].type == "heading_open"
                ):
                    tokens[i] = _Block(token)  # type: ignore[call-overload]
            state.env[_COMPACTED] = len(tokens)
        return True

    return run


_COMPACTED = "ragline_compacted"  # tokens already made ``_Block`` (kept in ``env``)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark").enable("table")
    parser.core.ruler.at("inline", _heading_inline)
    ruler = parser.block.ruler
    for rule in list(ruler.__rules__):
        ruler.at(rule.name, _compacting(rule.fn), {"alt": list(rule.alt)})
    return parser


def block_tokens(
    text: str, max_heading_chars: int = DEFAULT_LIMITS.max_heading_chars
) -> list[Token]:
    """Block-level markdown-it tokens of ``text`` (CommonMark + tables); only a
    heading's ``inline`` token has its ``children`` parsed (others: none), and only
    as far as its first ``max_heading_chars`` characters of text need.

    ``token.map`` holds 0-based ``[first_line, end_line)`` ranges in ``text``.
    ``text`` should use ``\\n`` line endings (``ParsedNote.body`` does).
    """
    return _parser().parse(text, {_HEADING_CHARS: max_heading_chars})


def line_offsets(text: str) -> list[int]:
    """Character offset of the start of every line of ``text`` (``\\n`` endings)."""
    return [0, *(m.end() for m in re.finditer("\n", text))]


# ---------------------------------------------------------------------------
# decoding and frontmatter


def _decode(data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise NoteParseError(
            "the file is encoded as UTF-16 (byte-order mark found); re-save the file as UTF-8"
        )
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise NoteSkipped("binary content (NUL bytes) in a .md file")
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + bom
        raise NoteParseError(
            f"not valid UTF-8 (byte 0x{data[offset]:02x} at offset {offset}); "
            "re-save the file as UTF-8"
        ) from None
    # One newline convention, so that offsets, line numbers and markdown-it agree.
    return text.replace("\r\n", "\n").replace("\r", "\n")


_FENCE_LINE = re.compile(r"---[ \t]*")
_INT64 = range(-(2**63), 2**63)


class _Refused(yaml.MarkedYAMLError):
    """YAML that is valid but not accepted in frontmatter (an alias, deep nesting)."""


class _InvalidScalar(str):
    """A scalar YAML resolved to a type it cannot be (``2024-13-45``), kept as its
    text; ``reason`` says what is wrong."""

    kind: str
    reason: str


_SCALAR_KINDS = {
    "timestamp": "date",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "binary": "base64 value",
}


class _FrontmatterLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` (no Python tags) without aliases or deep nesting."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(
                problem=f"aliases (*{event.anchor}) are not allowed",
                problem_mark=event.start_mark,
            )
        if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            return super().compose_node(parent, index)
        if self._depth >= MAX_FRONTMATTER_DEPTH:
            raise _Refused(
                problem=f"nested deeper than {MAX_FRONTMATTER_DEPTH} levels",
                problem_mark=self.peek_event().start_mark,
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _lenient(tag: str) -> None:
    """Make the constructor of ``tag`` keep a value it cannot construct as text."""
    strict = yaml.SafeLoader.yaml_constructors[f"tag:yaml.org,2002:{tag}"]

    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):  # ``!!int [1]``: a tag on a list or map
            raise _Refused(
                problem=f"the tag {node.tag!r} needs a single value",
                problem_mark=node.start_mark,
            )
        try:
            value = strict(loader, node)
        except (ValueError, OverflowError) as exc:
            return _invalid(node.value, tag, _reason(str(exc), len(node.value)))
        except (TypeError, KeyError, IndexError, AttributeError, yaml.constructor.ConstructorError):
            # An explicit tag on text of another shape (``!!timestamp soon``).
            return _invalid(node.value, tag, "not written as one")
        # Integers past 64 bits stay text: JSON readers and Arrow cannot hold them.
        if isinstance(value, int) and not isinstance(value, bool) and value not in _INT64:
            return str(node.value)
        return value

    _FrontmatterLoader.add_constructor(f"tag:yaml.org,2002:{tag}", construct)


def _reason(message: str, length: int) -> str:
    if "integer string conversion" in message:  # Python's 4,300-digit guard
        return f"{length:,} characters long"
    return " ".join(message.split())[:100]


def _invalid(text: str, tag: str, reason: str) -> _InvalidScalar:
    value = _InvalidScalar(text)
    value.kind = _SCALAR_KINDS[tag]
    value.reason = reason
    return value


for _tag in _SCALAR_KINDS:
    _lenient(_tag)


def _invalid_scalars(value: Any, key: str) -> Iterator[tuple[str, _InvalidScalar]]:
    """(key path, value) of every ``_InvalidScalar`` in a loaded frontmatter."""
    if isinstance(value, _InvalidScalar):
        yield key, value
    elif isinstance(value, dict):
        for k, v in value.items():
            name = f"{key}.{k}" if key else str(k)
            if isinstance(k, _InvalidScalar):
                yield name, k
            yield from _invalid_scalars(v, name)
    elif isinstance(value, list | tuple | set | frozenset):
        for i, v in enumerate(value):
            yield from _invalid_scalars(v, f"{key}[{i}]")


def _warn_invalid_scalars(meta: dict[str, Any], warnings: list[str]) -> None:
    found = list(_invalid_scalars(meta, ""))
    for key, value in found[:_MAX_VALUE_WARNINGS]:
        shown = value if len(value) <= 60 else value[:57] + "..."
        warnings.append(
            f"frontmatter {key!r}: {str(shown)!r} is not a valid {value.kind} "
            f"({value.reason}); kept as text"
        )
    if len(found) > _MAX_VALUE_WARNINGS:
        warnings.append(f"frontmatter: {len(found) - _MAX_VALUE_WARNINGS} more values kept as text")


def _load_frontmatter(raw: str) -> Any:
    loader = _FrontmatterLoader(raw)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _split_frontmatter(
    text: str, warnings: list[str]
) -> tuple[dict[str, Any] | None, str, int, str, int]:
    """Return (metadata or None, body, body_start_line, raw yaml, yaml first line)."""
    if not _FENCE_LINE.fullmatch(text.partition("\n")[0]):  # no list of every line
        return None, text, 1, "", 0
    lines = text.split("\n")
    close = next((i for i in range(1, len(lines)) if _FENCE_LINE.fullmatch(lines[i])), None)
    if close is None:
        warnings.append(
            "frontmatter opened by '---' on line 1 is never closed; "
            "the whole file is treated as body"
        )
        return None, text, 1, "", 0
    raw = "\n".join(lines[1:close])
    body = "\n".join(lines[close + 1 :])
    body_start = close + 2
    if len(raw) > MAX_FRONTMATTER_CHARS:
        warnings.append(
            f"frontmatter is {len(raw):,} characters long (the limit is "
            f"{MAX_FRONTMATTER_CHARS:,}); metadata ignored, move long text into the body"
        )
        return None, body, body_start, raw, 2
    try:
        meta = _load_frontmatter(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        warnings.append(f"invalid YAML frontmatter{where}: {problem}; metadata ignored")
        return None, body, body_start, raw, 2
    except Exception as exc:
        # Not expected past the loader's guards; still the note's metadata, never its body.
        reason = " ".join(str(exc).split())[:120] or type(exc).__name__
        warnings.append(f"YAML frontmatter cannot be read ({reason}); metadata ignored")
        return None, body, body_start, raw, 2
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        warnings.append(
            f"invalid YAML frontmatter (line 2): expected key: value pairs, got a "
            f"{type(meta).__name__}; metadata ignored"
        )
        return None, body, body_start, raw, 2
    _warn_invalid_scalars(meta, warnings)
    return meta, body, body_start, raw, 2


def _get(meta: dict[str, Any], keys: Sequence[str]) -> tuple[str, Any] | None:
    """First present key (exact, then case-insensitive) with a non-empty value."""
    lowered = {str(k).strip().lower(): k for k in meta}
    for key in keys:
        real = key if key in meta else lowered.get(key)
        if real is not None and meta[real] not in (None, "", []):
            return str(real), meta[real]
    return None


def _first_date(meta: dict[str, Any], keys: Sequence[str], warnings: list[str]) -> datetime | None:
    """The first of ``keys`` whose value is a date; one that is not is reported and the
    next key is tried (``date: next tuesday`` beside a valid ``created``)."""
    lowered = {str(k).strip().lower(): k for k in meta}
    for key in keys:
        real = key if key in meta else lowered.get(key)
        if real is None or meta[real] in (None, "", []):
            continue
        if key in _FLAG_KEYS and isinstance(meta[real], bool):
            continue
        found = _to_datetime(str(real), meta[real], warnings)
        if found is not None:
            return found
    return None


def _string_list(value: Any, split: bool) -> list[str]:
    items: Iterable[Any]
    if isinstance(value, str):
        items = re.split(r"[,\s]+", value) if split else [value]
    elif isinstance(value, list | tuple | set):
        items = value
    elif value is None:
        items = []
    else:
        items = [value]
    out: list[str] = []
    for item in items:
        if item is None or isinstance(item, dict | list):
            continue
        s = str(item).strip()
        if s:
            out.append(s)
    return out


def _to_datetime(key: str, value: Any, warnings: list[str]) -> datetime | None:
    if isinstance(value, _InvalidScalar):
        return None  # already reported with its reason
    result: datetime | None = None
    if isinstance(value, datetime):
        result = value
    elif isinstance(value, date):
        result = datetime.combine(value, time(0, 0))
    elif isinstance(value, str):
        s = value.strip()
        try:
            result = datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s)
        except ValueError:
            result = None
    if result is None:
        warnings.append(f"frontmatter {key!r} is not a date ({value!r}); ignored")
        return None
    if result.tzinfo is None:
        return result.replace(tzinfo=UTC)
    try:
        return result.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00 is before the first datetime in UTC
        warnings.append(f"frontmatter {key!r} is out of range in UTC ({str(value)!r}); ignored")
        return None


# ---------------------------------------------------------------------------
# a date in a note's file name

# A day: 2024-01-15, 2024_01_15 (Logseq), 2024.01.15 or 20240115, anywhere in the name
# but not inside a longer number (a 12-digit Zettelkasten id is not read as a day).
_NAME_DAY = re.compile(r"(?<!\d)(\d{4})([-_.]?)(\d{2})\2(\d{2})(?![\d])")
_NAME_WEEK = re.compile(r"(?<!\d)(\d{4})-?[Ww](\d{2})(?![\d])")  # 2024-W03
# Whole names only: a month or quarter anywhere else is too often something else.
_NAME_MONTH = re.compile(r"(\d{4})-(\d{2})")  # 2024-01 (a monthly note)
_NAME_QUARTER = re.compile(r"(\d{4})-[Qq]([1-4])")  # 2024-Q2


def note_date_from_name(path: str) -> datetime | None:
    """The date a daily, weekly, monthly or quarterly note's file name gives (midnight
    UTC of the day; a week's Monday, a month's or quarter's first day), None when its
    name holds no valid date. Only the file name counts, never its folders."""
    stem = PurePosixPath(path).stem
    day: date | None = None
    if (whole := _NAME_MONTH.fullmatch(stem)) is not None:
        day = _valid_day(int(whole.group(1)), int(whole.group(2)), 1)
    elif (whole := _NAME_QUARTER.fullmatch(stem)) is not None:
        day = _valid_day(int(whole.group(1)), 3 * int(whole.group(2)) - 2, 1)
    else:
        for found in _NAME_DAY.finditer(stem):
            day = _valid_day(int(found.group(1)), int(found.group(3)), int(found.group(4)))
            if day is not None:
                break
        if day is None and (week := _NAME_WEEK.search(stem)) is not None:
            try:
                day = date.fromisocalendar(int(week.group(1)), int(week.group(2)), 1)
            except ValueError:  # week 53 of a year that has 52
                day = None
    return None if day is None else datetime.combine(day, time(0, 0), UTC)


def _valid_day(year: int, month: int, day: int) -> date | None:
    if year < 1000:
        return None
    try:
        return date(year, month, day)
    except ValueError:
        return None


# ---------------------------------------------------------------------------
# masking code, comments and HTML

_INLINE_CODE = re.compile(r"(?<![`\\])(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.S)
_OBSIDIAN_COMMENT = re.compile(r"%%.*?%%", re.S)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>\n]*>")


def _blanked(text: str) -> str:
    """``text`` with every character but newlines replaced by a space."""
    return "\n".join(" " * len(line) for line in text.split("\n"))


def _blank_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the ``[start, end)`` spans blanked (newlines kept), built from
    slices: a per-character list of a 20 MB body costs 8 bytes a character."""
    pieces: list[str] = []
    pos = 0
    for start, end in sorted(spans):
        start = max(start, pos)
        if end <= start:
            continue
        pieces.append(text[pos:start])
        pieces.append(_blanked(text[start:end]))
        pos = end
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def _blank_matches(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: _blanked(m.group(0)), text)


def _mask_code(body: str) -> tuple[str, list[tuple[int, int]]]:
    """(text with code and comments blanked, the spans of HTML blocks): the second
    text of ``_scan_body`` (HTML blanked too) is made from them when it is needed."""
    starts = line_offsets(body)
    code: list[tuple[int, int]] = []
    html_lines: list[tuple[int, int]] = []
    for tok in block_tokens(body):
        if tok.map is None:
            continue
        begin = starts[tok.map[0]] if tok.map[0] < len(starts) else len(body)
        end = starts[tok.map[1]] if tok.map[1] < len(starts) else len(body)
        if tok.type in ("fence", "code_block"):
            code.append((begin, end))
        elif tok.type == "html_block":
            html_lines.append((begin, end))
    del starts
    masked = _blank_spans(body, code)
    masked = _blank_matches(masked, _INLINE_CODE)
    masked = _blank_matches(masked, _HTML_COMMENT)
    masked = _blank_matches(masked, _OBSIDIAN_COMMENT)
    return masked, html_lines


# ---------------------------------------------------------------------------
# links and tags

_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_MD_LINK = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]"  # [text] (one level of nested brackets)
    r"\(\s*(<[^<>\n]*>|[^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)"  # (destination
    r"(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?\s*\)"  # "title")
)
_DOCUMENT_TYPES = ("pdf", "docx", "pptx", "xlsx", "epub", "html")
_LINKABLE_SUFFIXES = frozenset(
    {".md", ".markdown", "", *(x for t in _DOCUMENT_TYPES for x in ATTACHMENT_SUFFIXES[t])}
)
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_TAG = re.compile(r"(?<!\S)#([\w/-]+)")


def _line_of(starts: list[int], offset: int) -> int:
    """0-based line index of a character offset."""
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _wikilink(inner: str, embed: bool, line: int) -> Link | None:
    inner = inner.replace("\\|", "|")  # inside tables the alias pipe is escaped
    target, sep, alias = inner.partition("|")
    alias_value = alias.strip() if sep and alias.strip() else None
    name, sep, rest = target.partition("#")
    heading: str | None = None
    block: str | None = None
    if sep:
        rest = rest.strip()
        if rest.startswith("^"):
            block = rest[1:].strip() or None
        else:
            heading = rest or None
    name = name.strip()
    if not name and heading is None and block is None:
        return None
    return Link(name, heading, block, alias_value, embed, line)


def _markdown_link(text: str, dest: str, embed: bool, line: int) -> Link | None:
    dest = dest.strip()
    if dest.startswith("<") and dest.endswith(">"):
        dest = dest[1:-1].strip()
    if not dest or dest.startswith("//") or _URL_SCHEME.match(dest):
        return None
    path, _, fragment = dest.partition("#")
    path = unquote(path)
    fragment = unquote(fragment).strip()
    suffix = PurePosixPath(path).suffix.lower()
    # Local notes ("note.md", or an extension-less name that Obsidian resolves to a
    # note) and documents a vault may index (paper.pdf); not images or other files.
    if path and suffix not in _LINKABLE_SUFFIXES:
        return None
    if not path and not fragment:
        return None
    heading: str | None = None
    block: str | None = None
    if fragment.startswith("^"):
        block = fragment[1:] or None
    elif fragment:
        heading = fragment
    alias = text.strip() or None
    return Link(path.strip(), heading, block, alias, embed, line)


def _is_tag(name: str) -> bool:
    return any(not (c.isdigit() or c == "/") for c in name)


def _add_tag(tags: list[str], seen: set[str], raw: str) -> None:
    tag = raw.strip().lstrip("#").strip("/").lower()
    if tag and tag not in seen:
        seen.add(tag)
        tags.append(tag)


def _scan_body(
    body: str, body_start_line: int, links: list[Link], tags: list[str], seen: set[str]
) -> None:
    masked, html_lines = _mask_code(body)
    starts = line_offsets(body)
    found: list[tuple[int, Link]] = []
    for m in _WIKILINK.finditer(masked):
        line = _line_of(starts, m.start()) + body_start_line
        link = _wikilink(m.group(2), bool(m.group(1)), line)
        if link is not None:
            found.append((m.start(), link))
    without_wikilinks = _blank_matches(masked, _WIKILINK)
    for m in _MD_LINK.finditer(without_wikilinks):
        line = _line_of(starts, m.start()) + body_start_line
        link = _markdown_link(m.group(2), m.group(3), bool(m.group(1)), line)
        if link is not None:
            found.append((m.start(), link))
    del without_wikilinks, starts  # copies of the body: one at a time
    found.sort(key=lambda item: item[0])
    links.extend(link for _, link in found)
    no_html = _blank_matches(_blank_spans(masked, html_lines), _HTML_TAG)
    del masked
    for m in _TAG.finditer(_blank_matches(no_html, _WIKILINK)):
        name = m.group(1).rstrip("/")
        if _is_tag(name):
            _add_tag(tags, seen, name)


# ---------------------------------------------------------------------------
# entry point


def parse_markdown(data: bytes, path: str) -> ParsedNote:
    """Parse the bytes of one Markdown note found at ``path`` (relative POSIX path).

    Raises ``NoteSkipped`` for empty or binary files and ``NoteParseError`` for files
    that cannot be decoded. Broken frontmatter is not fatal: it becomes a warning.
    """
    text = _decode(data)
    if not text.strip():
        raise NoteSkipped("empty file")
    warnings: list[str] = []
    meta, body, body_start_line, raw_yaml, yaml_line = _split_frontmatter(text, warnings)
    frontmatter: dict[str, Any] = json_safe(meta) if meta else {}
    size = len(json.dumps(frontmatter, ensure_ascii=False)) if frontmatter else 0
    if size > MAX_FRONTMATTER_JSON_CHARS:
        warnings.append(
            f"frontmatter takes {size:,} characters as JSON (the limit is "
            f"{MAX_FRONTMATTER_JSON_CHARS:,}); metadata ignored, move long text into the body"
        )
        meta, frontmatter = None, {}
    if not body.strip() and not frontmatter and not warnings:
        raise NoteSkipped("empty file (only an empty frontmatter block)")

    meta = meta or {}
    title_item = _get(meta, ("title",))
    title = ""
    if title_item is not None and not isinstance(title_item[1], dict | list):
        title = str(title_item[1]).strip()
    if not title:
        title = PurePosixPath(path).stem or PurePosixPath(path).name

    alias_item = _get(meta, ("aliases", "alias"))
    aliases = list(dict.fromkeys(_string_list(alias_item[1], split=False))) if alias_item else []

    tags: list[str] = []
    seen: set[str] = set()
    tag_item = _get(meta, ("tags", "tag"))
    if tag_item is not None:
        for tag in _string_list(tag_item[1], split=True):
            _add_tag(tags, seen, tag)

    links: list[Link] = []
    if meta and raw_yaml:
        # Obsidian treats [[links]] in properties as links of the note.
        for i, line in enumerate(raw_yaml.split("\n")):
            for m in _WIKILINK.finditer(line):
                link = _wikilink(m.group(2), bool(m.group(1)), yaml_line + i)
                if link is not None:
                    links.append(link)
    _scan_body(body, body_start_line, links, tags, seen)

    created = _first_date(meta, _CREATED_KEYS, warnings)
    updated = _first_date(meta, _UPDATED_KEYS, warnings)

    return ParsedNote(
        path=path,
        title=title,
        aliases=aliases,
        tags=tags,
        links=links,
        created=created,
        updated=updated,
        frontmatter=frontmatter,
        body=body,
        body_start_line=body_start_line,
        warnings=warnings,
    )


def parse_markdown_document(data: bytes, path: str) -> ParsedDocument:
    """``parse_markdown`` as the kind-neutral ``ParsedDocument`` (frontmatter as metadata)."""
    try:
        note = parse_markdown(data, path)
    except NoteSkipped as exc:
        raise ItemSkipped(str(exc)) from None
    except NoteParseError as exc:
        raise ItemError(str(exc)) from None
    stem = PurePosixPath(path).stem or PurePosixPath(path).name
    return ParsedDocument(
        body=note.body,
        title=note.title if note.title != stem else None,
        body_start_line=note.body_start_line,
        metadata=note.frontmatter,
        aliases=tuple(note.aliases),
        tags=tuple(note.tags),
        links=tuple(note.links),
        created=note.created,
        updated=note.updated,
        warnings=tuple(note.warnings),
    )


def parse_markdown_file(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """The router's entry point: a Markdown file on disk (``options`` are not used)."""
    return parse_markdown_document(full_path.read_bytes(), rel_path)
