"""Plain-text files (TXT, LOG, CSV/TSV, JSON, YAML, RST) and the text helpers the
other format parsers share.

Text files are indexed as they are: the body keeps the file's lines, so a chunk's
line range is the file's line range. Only RST section titles are rewritten into
``#`` headings (on the same lines) so the markdown-aware chunker sees them.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path

from rag_sources.formats.model import ItemError, ItemSkipped, ParsedDocument, ParseOptions

__all__ = [
    "BINARY_SNIFF_BYTES",
    "UNREADABLE",
    "TextQuality",
    "cap_text",
    "decode_text",
    "heading_line",
    "is_placeholder_title",
    "markdown_safe",
    "parse_text",
    "short_error",
    "text_quality",
    "without_unreadable",
]

BINARY_SNIFF_BYTES = 8192

# ---------------------------------------------------------------------------
# shared helpers (used by the PDF, office, HTML and EPUB parsers)

_FAKE_HEADING = re.compile(r"^(#{1,6})(?=[ \t]|$)")
_FAKE_RULE = re.compile(r"^(?:[-=_*+][ \t]*){3,}$")


def markdown_safe(line: str) -> str:
    """One line of extracted plain text that markdown will not read as structure.

    Extracted text reaches a markdown-aware chunker: a line starting with ``# `` would
    become a heading and a ``---`` line a setext underline, so both are escaped;
    leading indentation (an indented code block in markdown) is dropped.
    """
    line = line.strip()
    if _FAKE_HEADING.match(line) or _FAKE_RULE.match(line):
        return "\\" + line
    return line


# Characters that carry no text: U+FFFD (what a decoder, or a PDF font without a
# Unicode map, gives for what it cannot read), control characters other than tab and
# line breaks, private-use code points (a symbol font's glyphs, unmapped glyph ids),
# noncharacters and lone surrogates. Indexed, they match nothing anyone types and
# fill chunks that rank on their title alone.
_UNREADABLE_CLASS = (
    "\ufffd\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ue000-\uf8ff"
    "\ufdd0-\ufdef\ufffe\uffff\U000f0000-\U0010ffff"
)
UNREADABLE = re.compile(f"[{_UNREADABLE_CLASS}]")
_PRIVATE_USE = re.compile("[\ue000-\uf8ff\U000f0000-\U0010fffd]")


@dataclass(frozen=True)
class TextQuality:
    """How much of a text is text: its characters other than whitespace, and how many
    of those are unreadable (``UNREADABLE``); ``private_use`` of them are private-use
    code points (a symbol font's bullets, often harmless)."""

    chars: int
    unreadable: int
    private_use: int = 0

    @property
    def lost(self) -> int:
        """Unreadable characters that stood for text (replacement, control)."""
        return self.unreadable - self.private_use

    @property
    def share(self) -> float:
        return self.unreadable / self.chars if self.chars else 0.0


def text_quality(text: str) -> TextQuality:
    """Count ``text``'s unreadable characters (one regex scan; a second only when it
    has any)."""
    unreadable = UNREADABLE.findall(text)
    chars = len(text) - sum(map(text.count, (" ", "\n", "\t", "\r")))
    if not unreadable:
        return TextQuality(chars, 0)
    private = sum(1 for c in unreadable if _PRIVATE_USE.match(c))
    return TextQuality(chars, len(unreadable), private)


def without_unreadable(text: str) -> str:
    """``text`` without its unreadable characters (``UNREADABLE``)."""
    return UNREADABLE.sub("", text) if UNREADABLE.search(text) else text


def heading_line(level: int, text: str) -> str:
    """A markdown ATX heading (``## text``) on one line; '' for empty text."""
    text = " ".join(text.split()).rstrip("#").strip()
    if not text:
        return ""
    return "#" * min(max(level, 1), 6) + " " + text


# What library messages may carry that a recorded reason must not: a traceback (from
# PyMuPDF's binding when a Python callback fails), absolute paths and install paths.
_TRACEBACK = re.compile(r"\s*Traceback \(most recent call last\).*", re.DOTALL)
_ABSOLUTE_PATH = re.compile(
    r"(?<![\w/.:])(?:[A-Za-z]:\\|/)(?:[^\s'\"<>()\\/]+[\\/])*([^\s'\"<>()\\/]*)"
)
_NESTED_PATH = re.compile(r"(?<![\w/.])(?:[\w.+~-]+[\\/]){2,}([\w.+~-]*)")
_BINDING_NOISE = re.compile(r"^code=\d+:\s*|<C_nullptr>|Director error:\s*")


def short_error(exc: BaseException, path: Path | None = None) -> str:
    """A library exception's message on one short line (for an ItemError reason).

    The file's full path, which libraries like to repeat, is shortened to its name;
    other paths to their last part; tracebacks are cut off.
    """
    text = str(exc)
    if isinstance(exc, MemoryError) or "MemoryError" in text:
        return "out of memory"
    if path is not None:
        text = text.replace(str(path), path.name)
    text = _TRACEBACK.sub("", text)
    text = _ABSOLUTE_PATH.sub(r"\1", text)
    text = _NESTED_PATH.sub(r"\1", text)
    text = _BINDING_NOISE.sub("", " ".join(text.split())).strip(" :")
    return text[:160] or type(exc).__name__


# Titles that authoring tools write by default: they name no content.
_PLACEHOLDER_TITLES = frozenset(
    {
        "untitled",
        "untitled document",
        "document",
        "title",
        "word document",
        "powerpoint presentation",
        "presentation",
        "slide 1",
    }
)


def is_placeholder_title(title: str) -> bool:
    """True for a tool's default title ("PowerPoint Presentation", "Untitled")."""
    return title.strip().lower() in _PLACEHOLDER_TITLES


def cap_text(text: str, options: ParseOptions, warnings: list[str]) -> str:
    """``text`` cut to ``options.max_chars`` (with a warning when cut)."""
    if len(text) <= options.max_chars:
        return text
    warnings.append(
        f"text cut to {options.max_chars:,} characters (the file has {len(text):,}); "
        "raise max_chars or split the file to index the rest"
    )
    return text[: options.max_chars]


def decode_text(data: bytes) -> str:
    """Bytes of a text file as ``str`` with ``\\n`` newlines.

    UTF-8 (with or without BOM) and UTF-16/32 with a BOM are accepted; anything else
    raises ``ItemError`` naming the first bad byte. Empty and binary files raise
    ``ItemSkipped``.
    """
    if not data:
        raise ItemSkipped("empty file")
    for bom, codec in (
        (codecs.BOM_UTF32_LE, "utf-32-le"),
        (codecs.BOM_UTF32_BE, "utf-32-be"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(codec)
            except UnicodeDecodeError as exc:
                offset = exc.start + len(bom)
                raise ItemError(
                    f"not valid {codec.upper()[:6]} (bad data at offset {offset}); "
                    "re-save the file as UTF-8"
                ) from None
            break
    else:
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            raise ItemSkipped("binary content (NUL bytes); not a text file")
        bom_len = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        try:
            text = data[bom_len:].decode("utf-8")
        except UnicodeDecodeError as exc:
            offset = exc.start + bom_len
            raise ItemError(
                f"not valid UTF-8 (byte 0x{data[offset]:02x} at offset {offset}); "
                "re-save the file as UTF-8"
            ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------------------
# RST section titles

_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t]*$")


def _rst_headings(text: str) -> str:
    """RST section titles as ``#`` headings, keeping every line where it was.

    A title is a line underlined (optionally also overlined) by one repeated
    punctuation character at least as long as the title; the levels follow the
    order in which the adornment styles first appear, as in docutils. The
    adornment lines become blank lines, so line numbers stay the file's.
    """
    lines = text.split("\n")
    styles: list[tuple[str, bool]] = []
    i = 0
    while i < len(lines) - 1:
        title = lines[i].strip()
        under = _RST_ADORNMENT.match(lines[i + 1])
        if not title or under is None or _RST_ADORNMENT.match(lines[i]) or lines[i][0] in " \t":
            i += 1
            continue
        if len(lines[i + 1].rstrip()) < len(title):
            i += 1
            continue
        over = i > 0 and lines[i - 1].rstrip() == lines[i + 1].rstrip()
        style = (under.group(1), over)
        if style not in styles:
            styles.append(style)
        lines[i] = heading_line(styles.index(style) + 1, title)
        lines[i + 1] = ""
        if over:
            lines[i - 1] = ""
        i += 2
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# entry point


def parse_text(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """Parse a plain-text file (any of TXT, LOG, CSV, TSV, JSON, YAML, RST)."""
    try:
        data = full_path.read_bytes()
    except OSError as exc:
        raise ItemError(f"cannot read the file ({exc.strerror}); check its permissions") from None
    text = decode_text(data)
    if not text.strip():
        raise ItemSkipped("no text (the file holds only whitespace)")
    warnings: list[str] = []
    text = cap_text(text, options, warnings)
    if full_path.suffix.lower() == ".rst":
        text = _rst_headings(text)
    return ParsedDocument(body=text, title=None, warnings=tuple(warnings))


def require_content(full_path: Path) -> None:
    """Fail with a one-line reason when the file cannot be read or is empty."""
    try:
        size = full_path.stat().st_size
    except OSError as exc:
        raise ItemError(f"cannot read the file ({exc.strerror}); check its permissions") from None
    if size == 0:
        raise ItemSkipped("empty file")
