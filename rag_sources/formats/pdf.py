"""PDF files with PyMuPDF: text per page, headings, metadata, OCR of image-only pages.

One ``Section`` per page with text (``page=N``, 1-based). Text comes in MuPDF's own
order (the content stream's), which kept columns apart on the docling samples where
``sort=True`` interleaved them (and, in layout mode, ran 6x slower). Ligatures are
expanded and words hyphenated across lines joined, so search finds them.

Headings: when the PDF has an outline, each page's ``heading_path`` is the outline
path in force where the page starts. Without one, blocks set clearly larger than
the body text become markdown ``#`` lines, so the markdown-aware chunker sees them.

Pages are processed one at a time (only compact per-line tuples are kept until the
body is assembled), so memory follows the text, not the page count. PyMuPDF is not
thread-safe: parse one PDF per thread at a time.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

from rag_sources.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    ParsedDocument,
    ParseOptions,
)
from rag_sources.formats.ocr import (
    MAX_DPI,
    MIN_DPI,
    OCR_DPI,
    deferred_description,
    ocr_available,
    ocr_dpi,
    ocr_textpage,
    page_ranges,
    too_large_reason,
    unread_script,
)
from rag_sources.formats.text import (
    UNREADABLE,
    cap_text,
    heading_line,
    is_placeholder_title,
    markdown_safe,
    require_content,
    short_error,
    text_quality,
    without_unreadable,
)

__all__ = ["parse_pdf", "pdf_date", "pymupdf_module", "text_blocks"]

# A block counts as a heading when its font is this much larger than the body text.
HEADING_RATIO = 1.15
HEADING_MIN_POINTS = 1.0
HEADING_MAX_CHARS = 150
HEADING_MAX_LEVELS = 3
TITLE_RATIO = 1.3
# Page area an image must cover for an empty page to count as scanned.
SCAN_MIN_AREA = 0.1
SCAN_MIN_PIXELS = 32  # an image smaller than this (either side) holds no readable text
OCR_MIN_CHARS = 4  # letters and digits OCR must find on a page for it to count
# Decoded bytes of one embedded font file or ICC colour profile: MuPDF reads these
# whole (a 1.6 MB PDF held a font inflating to 1 GB). The largest real fonts (CJK)
# are ~20 MB and profiles a few MB; past the cap the font or profile is not loaded.
MAX_FONT_BYTES = 32 << 20
MAX_PROFILE_BYTES = 16 << 20
# Text-layer quality: a line at least half of whose characters are unreadable
# (text.UNREADABLE: a font without a Unicode map drew it) holds no text. Such lines
# are left out, and read by OCR from the page's image when they hold at least
# OCR_GAP_CHARS of them (a word or more; a lone symbol or bullet is not worth it).
UNREADABLE_LINE_SHARE = 0.5
OCR_GAP_CHARS = 8
GAP_MARGIN = 3.0  # points around unreadable lines within which OCR'd lines are theirs
GAP_POINTS = 10.0  # text smaller than this is OCR'd finer than OCR_DPI (up to MAX_DPI)
SYMBOL_CHARS = 3  # fewer unreadable characters on a line of their own: a symbol
LOST_WARN_CHARS = 8  # fewer unreadable characters in a document go without a warning
WARN_RANGES = 8  # page ranges a warning lists before "…"


@dataclass(frozen=True)
class Gap:
    """Consecutive lines of a text block that hold no text, for OCR to read."""

    bbox: tuple[float, float, float, float]
    chars: int  # unreadable characters
    lost: int  # of which replacement or control characters (not private-use)
    fonts: tuple[str, ...]


@dataclass(frozen=True)
class Block:
    """One text block of a page: its lines and the smallest font size among them.

    A block with a ``gap`` stands for lines without text (and has no lines);
    ``dropped`` counts replacement and control characters taken out of ``lines``.
    """

    lines: tuple[str, ...]
    size: float
    gap: Gap | None = None
    dropped: int = 0


@dataclass
class _Page:
    number: int
    blocks: list[Block]
    heading_path: tuple[str, ...] = ()
    ocr: bool = False  # the whole page was recognised from its image
    recognised: bool = False  # lines without text were read by OCR
    pending: bool = False  # lines without text wait for the deferred OCR pass
    unread: str = ""  # why lines without text were not read by OCR

    @property
    def gaps(self) -> list[Gap]:
        return [b.gap for b in self.blocks if b.gap is not None]

    def ocr_gaps(self) -> list[Gap]:
        return [g for g in self.gaps if g.chars >= OCR_GAP_CHARS]

    def lost(self) -> int:
        """Characters of text the page's text layer holds unreadably (not counting
        lines the deferred OCR pass will read, nor private-use symbols and bullets)."""
        lost = sum(b.dropped for b in self.blocks)
        for gap in self.gaps:
            if gap.chars >= OCR_GAP_CHARS:
                lost += 0 if self.pending else gap.chars
            elif gap.lost >= SYMBOL_CHARS:
                lost += gap.lost
        return lost


@lru_cache(maxsize=1)
def pymupdf_module() -> ModuleType:
    import pymupdf

    # MuPDF prints repairs and font trouble to stderr; keep it quiet (warnings stay
    # readable through TOOLS.mupdf_warnings()).
    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)
    return pymupdf


def _flags(pymupdf: ModuleType) -> int:
    # No TEXT_PRESERVE_LIGATURES: "ﬁ" becomes "fi", so search finds the word.
    return int(
        pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP | pymupdf.TEXT_DEHYPHENATE
    )


# ---------------------------------------------------------------------------
# metadata


_PDF_DATE = re.compile(
    r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?\s*"
    r"(?:(Z)|([+-])(\d{2})'?(\d{2})?'?)?"
)


def pdf_date(raw: str | None) -> datetime | None:
    """A PDF date string (``D:20230101120000+01'00'``) as an aware datetime (UTC if none)."""
    if not raw:
        return None
    m = _PDF_DATE.match(raw.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second, _z, sign, tzh, tzm = m.groups()
    tz: timezone = UTC
    if sign:
        offset = timedelta(hours=int(tzh), minutes=int(tzm or 0))
        tz = timezone(offset if sign == "+" else -offset)
    try:
        return datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            tzinfo=tz,
        )
    except ValueError:
        return None


# Titles that are file names: "Microsoft Word - report.docx", "10811.exe", "905_Precinct".
_FILE_NAME = re.compile(
    r"^(?:microsoft (?:word|powerpoint|excel) - .*"
    r"|\S+\.(?:pdf|docx?|pptx?|xlsx?|od[tsp]|rtf|txt|tex|dvi|ps|eps|ai|indd|qxd|pub|html?"
    r"|exe|png|jpe?g|tiff?)"
    r"|\S*_\S*)$",
    re.IGNORECASE,
)
_UNSAFE_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def _clean(value: Any) -> str:
    """A metadata string on one line, without control characters or lone surrogates."""
    return " ".join(_UNSAFE_CHARS.sub("", str(value or "")).split())


def _title(raw: str, rel_path: str) -> str | None:
    """The metadata title unless it is a file name, a template's or no words at all."""
    title = _clean(raw)
    if len(title) < 2 or sum(c.isalpha() for c in title) < 2:
        return None
    if _FILE_NAME.match(title) or is_placeholder_title(title):
        return None
    if title == PurePosixPath(rel_path).stem:
        return None
    return title


# ---------------------------------------------------------------------------
# text


def text_blocks(textpage_dict: dict[str, Any], ocr: bool = False) -> list[Block]:
    """Text blocks of ``TextPage.extractDICT()`` output, in MuPDF's order.

    Unreadable characters (``text.UNREADABLE``) are dropped from lines; a run of
    lines that are mostly unreadable becomes a block with a ``Gap`` (where they are,
    for OCR). With ``ocr``, lines without a letter or digit are dropped (Tesseract
    reads specks and rules on a scan as stray punctuation).
    """
    blocks: list[Block] = []
    for block in textpage_dict.get("blocks", ()):
        if block.get("type", 0) != 0:
            continue
        lines: list[str] = []
        size = 0.0
        dropped = 0
        gap: list[_GapLine] = []
        for line in block.get("lines", ()):
            spans = line.get("spans", ())
            text = "".join(span.get("text", "") for span in spans).strip()
            if not text:
                continue
            # the size of the span holding most of the line (a superscript is no heading)
            main = max(spans, key=lambda s: len(s.get("text", "").strip()))
            line_size = float(main.get("size", 0.0))
            if UNREADABLE.search(text):
                quality = text_quality(text)
                if quality.unreadable >= quality.chars * UNREADABLE_LINE_SHARE:
                    if lines:
                        blocks.append(Block(tuple(lines), round(size, 1), dropped=dropped))
                        lines, dropped = [], 0
                    gap.append(_GapLine.of(line, line_size))
                    continue
                dropped += _GapLine.of(line, line_size, skip_bullet=True).lost
                text = without_unreadable(text).strip()
            if not text or (ocr and not any(c.isalnum() for c in text)):
                continue
            if gap:
                blocks.append(_gap_block(gap))
                gap = []
            size = line_size if not lines else min(size, line_size)
            lines.append(text)
        if lines:
            blocks.append(Block(tuple(lines), round(size, 1), dropped=dropped))
        if gap:
            blocks.append(_gap_block(gap))
    return blocks


# Fonts of symbols, dingbats and math signs: their glyphs are no text, mapped or not.
_SYMBOL_FONT = re.compile(
    r"wingding|webding|dingbat|symbol|marlett|mt ?extra|awesome|^cm(?:sy|ex)\d|^ms(?:am|bm)\d",
    re.IGNORECASE,
)
# One to three unreadable characters before a line's text: a bullet or a box.
_BULLET = re.compile(f"^(?:{UNREADABLE.pattern}){{1,3}}(?!{UNREADABLE.pattern})")


@dataclass(frozen=True)
class _GapLine:
    """The unreadable characters of one line, symbol fonts' left out."""

    bbox: tuple[float, float, float, float]
    size: float
    chars: int
    lost: int
    fonts: frozenset[str]

    @classmethod
    def of(cls, line: dict[str, Any], size: float, skip_bullet: bool = False) -> _GapLine:
        chars = lost = 0
        fonts: set[str] = set()
        for i, span in enumerate(line.get("spans", ())):
            text = span.get("text", "")
            font = _clean(span.get("font"))
            if not UNREADABLE.search(text) or _SYMBOL_FONT.search(font):
                continue
            if i == 0 and skip_bullet:
                text = _BULLET.sub("", text.lstrip())
            quality = text_quality(text)
            chars += quality.unreadable
            lost += quality.lost
            if quality.unreadable and font:
                fonts.add(font)
        x0, y0, x1, y1 = line.get("bbox", (0.0, 0.0, 0.0, 0.0))
        return cls((x0, y0, x1, y1), size, chars, lost, frozenset(fonts))


def _gap_block(lines: list[_GapLine]) -> Block:
    """A block standing for ``lines`` (``text_blocks``' mostly unreadable lines)."""
    gap = Gap(
        bbox=(
            min(line.bbox[0] for line in lines),
            min(line.bbox[1] for line in lines),
            max(line.bbox[2] for line in lines),
            max(line.bbox[3] for line in lines),
        ),
        chars=sum(line.chars for line in lines),
        lost=sum(line.lost for line in lines),
        fonts=tuple(sorted(frozenset().union(*(line.fonts for line in lines)))),
    )
    return Block((), round(min(line.size for line in lines), 1), gap=gap)


# Right-to-left letters: Hebrew, Arabic (and Syriac, Thaana…) and their presentation forms.
_RTL = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")


def _page_dict(textpage: Any) -> dict[str, Any]:
    """``textpage.extractDICT()``, the characters of right-to-left ligatures in their
    logical order.

    A glyph standing for several characters (the Arabic lam-alef "لا") gives MuPDF its
    first character with the glyph's width and the others with none, after it; putting
    a right-to-left line in logical order then reverses them ("ال"), and normally typed
    words with a lam-alef matched nothing. Only pages with right-to-left letters are
    read character by character to fix that.
    """
    page = textpage.extractDICT()
    if not any(
        _RTL.search(span.get("text", ""))
        for block in page.get("blocks", ())
        for line in block.get("lines", ())
        for span in line.get("spans", ())
    ):
        return page
    raw = textpage.extractRAWDICT()
    for block in raw.get("blocks", ()):
        for line in block.get("lines", ()):
            for span in line.get("spans", ()):
                span["text"] = _logical_text(span.pop("chars", ()))
    return raw


def _logical_text(chars: list[dict[str, Any]]) -> str:
    """A span's characters (``extractRAWDICT``), each run of zero-width right-to-left
    characters that precedes the glyph it belongs to moved after it, in reverse."""
    out: list[str] = []
    i, n = 0, len(chars)
    while i < n:
        j = i
        while j < n and _zero_width(chars[j]) and _RTL.match(chars[j]["c"]):
            j += 1
        if (
            i < j < n
            and _RTL.match(chars[j]["c"])
            and abs(chars[j]["bbox"][2] - chars[i]["bbox"][0]) < 0.5
        ):
            out.append(chars[j]["c"])
            out.extend(c["c"] for c in reversed(chars[i:j]))
            i = j + 1
        else:
            out.append(chars[i]["c"])
            i += 1
    return "".join(out)


def _zero_width(char: dict[str, Any]) -> bool:
    x0, _y0, x1, _y1 = char.get("bbox", (0, 0, 1, 0))
    return abs(x1 - x0) < 0.01


def _body_size(pages: list[_Page]) -> float:
    sizes: Counter[float] = Counter()
    for page in pages:
        if page.ocr:
            continue
        for block in page.blocks:
            if block.lines:
                sizes[block.size] += sum(len(line) for line in block.lines)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _is_heading_block(block: Block, body: float) -> bool:
    if body <= 0 or block.size < body * HEADING_RATIO or block.size - body < HEADING_MIN_POINTS:
        return False
    text = " ".join(block.lines)
    return (
        2 <= len(text) <= HEADING_MAX_CHARS
        and len(text.split()) <= 20
        and sum(c.isalpha() for c in text) >= 2
    )


def _heading_levels(pages: list[_Page], body: float) -> dict[float, int]:
    """Font size -> heading level (1 = largest), or {} when sizes say nothing."""
    blocks = [b for p in pages if not p.ocr for b in p.blocks if b.lines]
    sizes = sorted({round(b.size * 2) / 2 for b in blocks if _is_heading_block(b, body)})
    heading_count = sum(1 for b in blocks if _is_heading_block(b, body))
    # Slides and posters set most text large: then size marks no structure.
    if not sizes or heading_count > max(3, len(blocks) * 0.4):
        return {}
    sizes.reverse()
    return {s: min(i + 1, HEADING_MAX_LEVELS) for i, s in enumerate(sizes)}


def _render(page: _Page, body: float, levels: dict[float, int], stack: list[str]) -> str:
    """The page as text; detected headings become ``#`` lines and update ``stack``."""
    parts: list[str] = []
    for block in page.blocks:
        level = levels.get(round(block.size * 2) / 2) if levels else None
        if level and not page.ocr and _is_heading_block(block, body):
            line = heading_line(level, " ".join(block.lines))
            if line:
                parts.append(line)
                _apply(stack, level, line.lstrip("#").strip())
                continue
        text = "\n".join(filter(None, (markdown_safe(line) for line in block.lines)))
        if text:
            parts.append(text)
    return "\n\n".join(parts)


def _first_heading(page: _Page, body: float) -> str | None:
    """The largest clearly-large block of the first page: the document's title."""
    if page.ocr or body <= 0:
        return None
    candidates = [b for b in page.blocks if _is_heading_block(b, body)]
    if not candidates:
        return None
    best = max(candidates, key=lambda b: b.size)
    if best.size < body * TITLE_RATIO:
        return None
    return " ".join(" ".join(best.lines).split()) or None


# ---------------------------------------------------------------------------
# outline


def _outline(doc: Any, warnings: list[str]) -> dict[int, list[tuple[int, str, float | None]]]:
    """Outline entries by 1-based page: ``[(level, title, y from the top or None)]``."""
    try:
        toc = doc.get_toc(simple=False)
    except Exception as exc:  # a broken outline must not cost the document
        warnings.append(f"PDF outline unreadable ({short_error(exc)}); headings not used")
        return {}
    by_page: dict[int, list[tuple[int, str, float | None]]] = {}
    for entry in toc:
        level, title, page = int(entry[0]), _clean(entry[1]), int(entry[2])
        if page < 1 or not title:
            continue
        dest = entry[3] if len(entry) > 3 and isinstance(entry[3], dict) else {}
        to = dest.get("to")
        y = float(to.y) if to is not None and getattr(to, "y", None) is not None else None
        by_page.setdefault(page, []).append((level, title, y))
    return by_page


def _apply(stack: list[str], level: int, title: str) -> None:
    del stack[max(level - 1, 0) :]
    stack.append(title)


def _page_path(
    stack: list[str], entries: list[tuple[int, str, float | None]], height: float
) -> tuple[str, ...]:
    """Heading path where a page starts; updates ``stack`` to where it ends.

    An entry on this page counts as in force at its start when its destination is
    in the top fifth of the page (PDF coordinates count y from the bottom) or unknown.
    """
    start = list(stack)
    at_top = True
    for level, title, y in entries:
        if at_top and (y is None or y <= 0 or height - y <= height * 0.2):
            _apply(start, level, title)
        else:
            at_top = False
        _apply(stack, level, title)
    return tuple(start)


# ---------------------------------------------------------------------------
# streams MuPDF reads whole

_REFERENCE = re.compile(r"(\d+)\s+\d+\s+R")
_ICC_BASED = re.compile(r"/ICCBased\s+(\d+)\s+\d+\s+R")
_DEVICE_SPACES = {"1": "/DeviceGray", "3": "/DeviceRGB", "4": "/DeviceCMYK"}


class _Resources:
    """Embedded fonts and ICC profiles, checked before MuPDF loads one: each stream is
    decoded through MuPDF's own filters as a stream, up to its cap, and discarded;
    one that decodes past the cap is unhooked from the (in-memory) document, so MuPDF
    falls back to a substitute font or a device colour space. Each is checked once."""

    def __init__(self, pymupdf: ModuleType, doc: Any) -> None:
        self.mupdf = pymupdf.mupdf
        self.doc = doc
        try:
            self.pdf = self.mupdf.pdf_specifics(doc.this)
        except Exception:  # not a PDF after all: nothing to check
            self.pdf = None
        self.seen: set[int] = set()
        self.fonts: list[str] = []
        self.profiles = 0

    def _over(self, xref: int, cap: int) -> bool:
        try:
            stream = self.mupdf.pdf_open_stream_number(self.pdf, xref)
            return int(self.mupdf.fz_skip(stream, cap + 1)) > cap
        except Exception:  # a damaged stream: MuPDF reports it where it uses it
            return False

    def _key(self, xref: int, key: str) -> tuple[str, str]:
        try:
            return self.doc.xref_get_key(xref, key)
        except Exception:
            return "null", "null"

    def _first_reference(self, xref: int, key: str) -> int | None:
        kind, value = self._key(xref, key)
        if kind == "xref":
            number = int(value.split()[0])
            if key != "DescendantFonts":
                return number
            try:  # an indirect array of descendant fonts
                value = self.doc.xref_object(number, compressed=True)
            except Exception:
                return None
        m = _REFERENCE.search(value) if kind in ("array", "xref") else None
        return int(m.group(1)) if m else None

    def check_fonts(self, page: Any) -> None:
        if self.pdf is None:
            return
        try:
            fonts = page.get_fonts(full=True)
        except Exception:
            return
        for entry in fonts:
            font = int(entry[0])
            if font <= 0 or font in self.seen:
                continue
            self.seen.add(font)
            for owner in (font, self._first_reference(font, "DescendantFonts")):
                descriptor = self._first_reference(owner, "FontDescriptor") if owner else None
                if descriptor is None:
                    continue
                for key in ("FontFile", "FontFile2", "FontFile3"):
                    stream = self._first_reference(descriptor, key)
                    if stream is not None and self._over(stream, MAX_FONT_BYTES):
                        self.doc.xref_set_key(descriptor, key, "null")
                        self.fonts.append(_clean(entry[3]) or f"object {font}")

    def check_profiles(self, page: Any) -> None:
        if self.pdf is None:
            return
        try:
            images = page.get_images(full=True)
        except Exception:
            return
        for entry in images:
            image = int(entry[0])
            if image <= 0 or image in self.seen:
                continue
            self.seen.add(image)
            kind, value = self._key(image, "ColorSpace")
            if kind == "xref":
                try:
                    value = self.doc.xref_object(int(value.split()[0]), compressed=True)
                except Exception:
                    continue
            m = _ICC_BASED.search(value)
            if m is None or not self._over(int(m.group(1)), MAX_PROFILE_BYTES):
                continue
            components = self._key(int(m.group(1)), "N")[1]
            self.doc.xref_set_key(image, "ColorSpace", _DEVICE_SPACES.get(components, "/DeviceRGB"))
            self.profiles += 1

    def warnings(self) -> list[str]:
        found: list[str] = []
        if self.fonts:
            names = ", ".join(dict.fromkeys(self.fonts[:3]))
            found.append(
                f"{len(self.fonts)} embedded font(s) decode to more than "
                f"{MAX_FONT_BYTES >> 20} MiB ({names}); not loaded, text read with a "
                "substitute font"
            )
        if self.profiles:
            found.append(
                f"{self.profiles} image colour profile(s) decode to more than "
                f"{MAX_PROFILE_BYTES >> 20} MiB; not loaded, device colours used"
            )
        return found


# ---------------------------------------------------------------------------
# XFA forms

# What an XFA-only form's pages show in a viewer that cannot render XFA.
_XFA_PLACEHOLDER = re.compile(
    r"please wait.{0,300}?(?:adobe reader|pdf viewer may not be able to display)",
    re.IGNORECASE | re.DOTALL,
)
_XFA_PACKET = re.compile(r"\(([^()]*)\)\s*(\d+)\s+\d+\s+R")
# Template elements holding what a form shows: static text, rich text, captions'
# and choice lists' text, tooltips and spoken text.
_XFA_TEXT = frozenset({"text", "exData", "speak", "toolTip"})
# Template elements holding no shown text (scripts, bindings, patterns).
_XFA_SKIP = frozenset(
    {"script", "bind", "picture", "validate", "calculate", "event", "connect", "setProperty"}
)


def _xfa_packets(doc: Any) -> dict[str, int]:
    """The XFA packets of the PDF's interactive form: name -> stream xref ({} when
    it has no XFA); one stream holding the whole XDP is named "xdp"."""
    try:
        kind, value = doc.xref_get_key(doc.pdf_catalog(), "AcroForm/XFA")
        if kind == "xref":
            xref = int(value.split()[0])
            if doc.xref_is_stream(xref):
                return {"xdp": xref}
            kind, value = "array", doc.xref_object(xref, compressed=True)
    except Exception:  # no catalog or a broken form: no XFA to speak of
        return {}
    if kind != "array":
        return {}
    return {name: int(xref) for name, xref in _XFA_PACKET.findall(value)}


def _xfa_only(doc: Any) -> bool:
    """Whether the PDF's pages are only a placeholder for its XFA form (a "dynamic"
    form, which viewers other than Adobe's show as "Please wait…")."""
    try:
        if doc.xref_get_key(doc.pdf_catalog(), "NeedsRendering") == ("bool", "true"):
            return True
        text = doc.load_page(0).get_text()[:4000]
    except Exception:
        return False
    return bool(_XFA_PLACEHOLDER.search(text))


def _xfa_document(
    pymupdf: ModuleType, doc: Any, rel_path: str, options: ParseOptions
) -> ParsedDocument | None:
    """An XFA-only form as the text its XFA packets hold (the template's text and the
    data filled in), or None for a PDF whose pages are its content.

    Raises ``ItemSkipped`` when the form holds no text: its pages would index only
    the viewer's "Please wait…" message.
    """
    packets = _xfa_packets(doc)
    if not packets or not _xfa_only(doc):
        return None
    cap = options.limits.max_markup_part_bytes
    lines: list[str] = []
    oversize: list[str] = []
    for name in ("xdp", "template", "datasets"):
        xref = packets.get(name)
        if xref is None:
            continue
        data = _stream_within(pymupdf, doc, xref, cap)
        if data is None:
            oversize.append(name)
            continue
        lines += _xfa_lines(data)
    lines = [line for i, line in enumerate(lines) if line and (i == 0 or line != lines[i - 1])]
    if not lines:
        raise ItemSkipped(
            'XFA form: its pages hold only a viewer\'s "Please wait" message and the form '
            "no text; save it as a standard PDF from Adobe Acrobat to index it"
        )
    warnings = [
        'XFA form: its pages hold only a viewer\'s "Please wait" message; indexed the '
        "text of the form itself (labels, text and filled-in data), without pages"
    ]
    if oversize:
        warnings.append(
            f"XFA {', '.join(oversize)} larger than [limits] max_markup_part_bytes; not read"
        )
    body = cap_text("\n".join(markdown_safe(line) for line in lines), options, warnings)
    info = _info(doc)
    metadata: dict[str, Any] = {"page_count": doc.page_count, "xfa": True}
    for key in ("author", "subject", "keywords"):
        value = _clean(info.get(key))
        if value:
            metadata[key] = value
    return ParsedDocument(
        body=body + "\n",
        title=_title(info.get("title", ""), rel_path),
        metadata=metadata,
        created=pdf_date(info.get("creationDate")),
        updated=pdf_date(info.get("modDate")),
        warnings=tuple(warnings),
    )


def _stream_within(pymupdf: ModuleType, doc: Any, xref: int, cap: int) -> bytes | None:
    """The decoded stream ``xref`` when it decodes to at most ``cap`` bytes."""
    mupdf = pymupdf.mupdf
    try:
        stream = mupdf.pdf_open_stream_number(mupdf.pdf_specifics(doc.this), xref)
        if int(mupdf.fz_skip(stream, cap + 1)) > cap:
            return None
        return bytes(doc.xref_stream(xref) or b"")
    except Exception:  # a damaged stream: nothing to read
        return b""


def _xfa_lines(data: bytes) -> list[str]:
    """The shown text of an XFA packet (or a whole XDP): the template's text and
    captions in document order, then the filled-in data as ``name: value``."""
    from lxml import etree

    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, recover=True, remove_comments=True
    )
    try:
        root = etree.fromstring(data, parser=parser)
    except (etree.LxmlError, ValueError):
        return []
    if root is None:
        return []
    lines: list[str] = []
    data_lines: list[str] = []
    stack = [(root, False)]
    while stack:
        element, in_data = stack.pop()
        if not isinstance(element.tag, str):
            continue
        name = etree.QName(element).localname
        if name in _XFA_SKIP:
            continue
        in_data = in_data or name == "data"
        if in_data and len(element) == 0:
            value = " ".join((element.text or "").split())
            if value:
                data_lines.append(f"{name}: {value}")
            continue
        if not in_data and name in _XFA_TEXT:
            text = " ".join(" ".join(element.itertext()).split())
            if text:
                lines.append(text)
            continue
        stack.extend((child, in_data) for child in reversed(element))
    return lines + data_lines


# ---------------------------------------------------------------------------
# opening


def _open(pymupdf: ModuleType, full_path: Path) -> Any:
    require_content(full_path)
    pymupdf.TOOLS.reset_mupdf_warnings()
    try:
        doc = pymupdf.open(full_path, filetype="pdf")
    except pymupdf.EmptyFileError:
        raise ItemSkipped("empty file") from None
    except pymupdf.FileDataError as exc:
        raise ItemError(
            f"not a PDF or damaged beyond repair ({short_error(exc, full_path)}); "
            "re-export or exclude the file"
        ) from None
    except (RuntimeError, ValueError) as exc:
        raise ItemError(
            f"cannot open the PDF ({short_error(exc, full_path)}); re-export or exclude the file"
        ) from None
    except OSError as exc:
        raise ItemError(f"cannot read the file ({exc.strerror}); check its permissions") from None
    # Read needs_pass only here: after authenticate() reading it again re-locks the file.
    if doc.needs_pass:
        doc.close()
        raise ItemError(
            "encrypted PDF (password required); remove the password or exclude the file"
        )
    if doc.page_count == 0:
        repaired = doc.is_repaired
        doc.close()
        if repaired:
            raise ItemError(
                "truncated or damaged PDF (no readable pages after repair); "
                "re-download or re-export the file"
            )
        raise ItemSkipped("PDF without pages")
    return doc


def _needs_ocr(page: Any) -> bool:
    """An empty page showing an image that covers a fair part of it (a scan)."""
    try:
        infos = page.get_image_info()
        area = abs(page.rect)
    except Exception:
        return False
    if area <= 0:
        return False
    covered = 0.0
    for info in infos:
        if min(info.get("width", 0), info.get("height", 0)) < SCAN_MIN_PIXELS:
            continue
        x0, y0, x1, y1 = info.get("bbox", (0, 0, 0, 0))
        covered += max(0.0, x1 - x0) * max(0.0, y1 - y0)
    return covered >= area * SCAN_MIN_AREA


def _scan_dpi(page: Any) -> float:
    """Pixels per inch of the finest image on ``page`` (``OCR_DPI`` when unknown)."""
    finest = 0.0
    try:
        infos = page.get_image_info()
    except Exception:
        return float(OCR_DPI)
    for info in infos:
        x0, _y0, x1, _y1 = info.get("bbox", (0, 0, 0, 0))
        if x1 - x0 > 0 and info.get("width", 0) >= SCAN_MIN_PIXELS:
            finest = max(finest, info["width"] * 72 / (x1 - x0))
    return finest or float(OCR_DPI)


# ---------------------------------------------------------------------------
# entry point


def parse_pdf(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """Parse one PDF into one section per page (OCR for pages without text, see ocr.py)."""
    pymupdf = pymupdf_module()
    doc = _open(pymupdf, full_path)
    try:
        return _parse(pymupdf, doc, rel_path, options)
    finally:
        doc.close()


def _parse(pymupdf: ModuleType, doc: Any, rel_path: str, options: ParseOptions) -> ParsedDocument:
    xfa = _xfa_document(pymupdf, doc, rel_path, options)
    if xfa is not None:
        return xfa
    warnings: list[str] = []
    flags = _flags(pymupdf)
    page_count = doc.page_count
    if doc.is_repaired:
        warnings.append("damaged PDF repaired while opening; some text may be missing")
    outline = _outline(doc, warnings)
    stack: list[str] = []

    pages: list[_Page] = []
    scanned: list[int] = []
    scanned_paths: dict[int, tuple[str, ...]] = {}
    broken: list[int] = []
    chars = 0
    last_read = page_count
    resources = _Resources(pymupdf, doc)
    for index in range(page_count):
        number = index + 1
        try:
            page = doc.load_page(index)
            height = page.rect.height
            resources.check_fonts(page)
            blocks = text_blocks(_page_dict(page.get_textpage(flags=flags)))
        except Exception:  # one broken page content stream must not cost the document
            broken.append(number)
            continue
        path = _page_path(stack, outline.get(number, []), height) if outline else ()
        readable = any(b.lines for b in blocks)
        if not readable:
            resources.check_profiles(page)  # before MuPDF reads the images' colour spaces
        if not readable and _needs_ocr(page):
            # a scan (its text layer, if any, unreadable): OCR reads the whole page
            scanned.append(number)
            scanned_paths[number] = path
        elif blocks:
            pages.append(_Page(number, blocks, path))
            chars += sum(len(line) + 1 for b in blocks for line in b.lines)
        del page
        if chars > options.max_chars:
            last_read = number
            break
    if broken:
        warnings.append(f"pages {page_ranges(broken)} could not be read; skipped")
    warnings.extend(resources.warnings())

    deferred: tuple[str, ...] = ()
    ocr_pages: list[int] = []
    too_large = ""
    if scanned or any(page.ocr_gaps() for page in pages):
        deferred, ocr_pages, too_large = _run_ocr(
            doc, scanned, pages, scanned_paths, options, warnings
        )
    lost = _warn_lost(pages, warnings)
    pages = [page for page in pages if any(b.lines for b in page.blocks)]

    if not pages and not deferred:
        if scanned:
            if options.ocr == "off":
                raise ItemSkipped("no text layer (image-only PDF); OCR is off for this source")
            reason = ocr_available(options.ocr_languages)
            if reason:
                raise ItemSkipped(f"no text layer (image-only PDF); {reason}")
            if too_large:
                raise ItemSkipped(f"no text layer (image-only PDF), too large to OCR: {too_large}")
            raise ItemSkipped("no text layer (image-only PDF) and OCR found no text")
        if lost:
            raise ItemSkipped(f"no readable text: {lost}")
        if broken:
            raise ItemError(
                f"no page could be read (pages {page_ranges(broken)} failed); "
                "re-export or exclude the file"
            )
        raise ItemSkipped("no text on any page (and no scanned images to OCR)")

    body_size = _body_size(pages)
    levels = {} if outline else _heading_levels(pages, body_size)
    builder = BodyBuilder()
    detected: list[str] = []  # headings found so far: the path where the next page starts
    for page in pages:
        if levels:
            page.heading_path = tuple(detected)
        text = _render(page, body_size, levels, detected)
        room = options.max_chars - builder.chars
        if room <= 0:
            break
        if len(text) > room:
            text = text[:room]
        builder.add(
            f"page={page.number}",
            f"Page {page.number}",
            text,
            page.heading_path,
            page.ocr or page.recognised,
        )
    if chars > options.max_chars or builder.chars >= options.max_chars:
        warnings.append(
            f"text cut at {options.max_chars:,} characters (page {min(last_read, page_count)} "
            f"of {page_count}); raise max_chars or split the PDF to index the rest"
        )

    info = _info(doc)
    title = _title(info.get("title", ""), rel_path)
    if title is None and not outline and pages and pages[0].number == 1:
        title = _first_heading(pages[0], body_size)
    created = pdf_date(info.get("creationDate"))
    updated = pdf_date(info.get("modDate"))
    metadata: dict[str, Any] = {"page_count": page_count}
    for key in ("author", "subject", "keywords"):
        value = _clean(info.get(key))
        if value:
            metadata[key] = value
    if created:
        metadata["created"] = created.isoformat()
    if updated:
        metadata["modified"] = updated.isoformat()
    if ocr_pages:
        metadata["ocr_pages"] = ocr_pages
    return builder.document(
        title=title,
        metadata=metadata,
        created=created,
        updated=updated,
        warnings=tuple(warnings),
        deferred=deferred,
    )


def _info(doc: Any) -> dict[str, Any]:
    try:
        return dict(doc.metadata or {})
    except Exception:  # unreadable Info dictionary: no metadata, text still counts
        return {}


def _run_ocr(
    doc: Any,
    scanned: list[int],
    pages: list[_Page],
    paths: dict[int, tuple[str, ...]],
    options: ParseOptions,
    warnings: list[str],
) -> tuple[tuple[str, ...], list[int], str]:
    """OCR (or defer, or report) the pages without a text layer and the lines of
    ``pages`` without text; returns (deferred, pages OCR'd, why pages were too large
    to OCR). Lines left unread record why on their page (``_Page.unread``)."""
    what = f"{len(scanned)} page{'s' if len(scanned) > 1 else ''} ({page_ranges(scanned)})"
    garbled = {page.number: page for page in pages if page.ocr_gaps()}
    if options.ocr == "off":
        if pages and scanned:
            warnings.append(f"{what} have no text layer and were not indexed; OCR is off")
        for page in garbled.values():
            page.unread = "OCR is off for this source"
        return (), [], ""
    reason = ocr_available(options.ocr_languages)
    if reason:
        if pages and scanned:
            warnings.append(f"{reason}; {what} without a text layer were not indexed")
        for page in garbled.values():
            page.unread = reason
        return (), [], ""
    for number, page in list(garbled.items()):
        script = unread_script(options.ocr_languages, "".join(_page_lines(page)))
        if script:
            page.unread = (
                f"the source's ocr_languages ({', '.join(options.ocr_languages)}) do not "
                f"read {script}: add it to OCR them"
            )
            del garbled[number]
    plan, too_large = _ocr_plan(doc, scanned, options.limits.max_image_pixels, warnings)
    gap_plan = _gap_plan(doc, garbled, options.limits.max_image_pixels)
    if not plan and not gap_plan:
        return (), [], too_large
    if not options.allow_deferred_work:
        for number in gap_plan:
            garbled[number].pending = True
        return (deferred_description(sorted({*plan, *gap_plan})),), [], too_large
    done: list[int] = []
    failed: list[int] = []
    for number, dpi in plan.items():
        try:
            page = doc.load_page(number - 1)
            textpage = ocr_textpage(page, options, dpi)
            textpage_dict = textpage.extractDICT()
        except Exception:  # Tesseract or rendering failed on this page
            failed.append(number)
            continue
        blocks = text_blocks(textpage_dict, ocr=True)
        # a photo or a logo reads as a few stray letters: that is no text
        if sum(c.isalnum() for b in blocks for line in b.lines for c in line) >= OCR_MIN_CHARS:
            pages.append(_Page(number, blocks, paths.get(number, ()), ocr=True))
            done.append(number)
    for number, (clip, dpi) in gap_plan.items():
        try:
            page = doc.load_page(number - 1)
            textpage_dict = ocr_textpage(page, options, dpi, clip).extractDICT()
        except Exception:
            failed.append(number)
            garbled[number].unread = "OCR failed there"
            continue
        if _fill_gaps(garbled[number], _ocr_lines(textpage_dict, clip, dpi)):
            done.append(number)
    pages.sort(key=lambda p: p.number)
    if failed:
        warnings.append(f"OCR failed on pages {page_ranges(failed)}; they were not indexed")
    empty = sorted(set(plan) - set(done) - set(failed))
    if empty:
        warnings.append(f"OCR found no text on pages {page_ranges(empty)}")
    return (), sorted(done), too_large


def _page_lines(page: _Page) -> list[str]:
    return [line for block in page.blocks for line in block.lines]


def _gap_plan(
    doc: Any, garbled: dict[int, _Page], max_pixels: int
) -> dict[int, tuple[tuple[float, float, float, float], int]]:
    """Page -> (the area of its lines without text, the resolution to OCR it at):
    the area only, at a resolution that renders small type large enough to read."""
    plan: dict[int, tuple[tuple[float, float, float, float], int]] = {}
    for number, page in garbled.items():
        gaps = page.ocr_gaps()
        try:
            rect = doc.load_page(number - 1).rect
        except Exception:  # an unreadable page: the OCR pass reports it
            continue
        clip = (
            max(rect.x0, min(g.bbox[0] for g in gaps) - GAP_MARGIN),
            max(rect.y0, min(g.bbox[1] for g in gaps) - GAP_MARGIN),
            min(rect.x1, max(g.bbox[2] for g in gaps) + GAP_MARGIN),
            min(rect.y1, max(g.bbox[3] for g in gaps) + GAP_MARGIN),
        )
        if clip[2] <= clip[0] or clip[3] <= clip[1]:
            continue
        size = min(b.size for b in page.blocks if b.gap in gaps) or GAP_POINTS
        wanted = min(MAX_DPI, max(OCR_DPI, round(OCR_DPI * GAP_POINTS / size)))
        dpi = ocr_dpi(clip[2] - clip[0], clip[3] - clip[1], wanted, max_pixels, MIN_DPI)
        if dpi is None:
            page.unread = "too large to OCR within [limits] max_image_pixels"
            continue
        plan[number] = (clip, dpi)
    return plan


def _ocr_lines(
    textpage_dict: dict[str, Any], clip: tuple[float, float, float, float], dpi: int
) -> list[tuple[tuple[float, float], str]]:
    """OCR'd lines of an area rendered at ``dpi``: (centre in page coordinates, text)."""
    zoom = dpi / 72
    lines = []
    for block in textpage_dict.get("blocks", ()):
        for line in block.get("lines", ()):
            text = without_unreadable(
                "".join(span.get("text", "") for span in line.get("spans", ()))
            ).strip()
            if not any(c.isalnum() for c in text):
                continue
            x0, y0, x1, y1 = line.get("bbox", (0, 0, 0, 0))
            centre = (clip[0] + (x0 + x1) / 2 / zoom, clip[1] + (y0 + y1) / 2 / zoom)
            lines.append((centre, text))
    return lines


def _fill_gaps(page: _Page, lines: list[tuple[tuple[float, float], str]]) -> bool:
    """Put the OCR'd ``lines`` in place of the page's lines without text, each into
    the gap it lies in; True when any gap was filled."""
    filled = False
    for i, block in enumerate(page.blocks):
        gap = block.gap
        if gap is None or gap.chars < OCR_GAP_CHARS:
            continue
        x0, y0, x1, y1 = gap.bbox
        inside = [
            text
            for (x, y), text in lines
            if x0 - GAP_MARGIN <= x <= x1 + GAP_MARGIN and y0 - GAP_MARGIN <= y <= y1 + GAP_MARGIN
        ]
        if inside:
            page.blocks[i] = Block(tuple(inside), block.size)
            filled = True
    page.recognised = page.recognised or filled
    if page.ocr_gaps():
        page.unread = "OCR found no text there"
    return filled


def _warn_lost(pages: list[_Page], warnings: list[str]) -> str:
    """Warn about text the pages' text layers hold in unreadable characters (left
    out); returns the warning for the whole document ('' when nothing was lost)."""
    by_reason: dict[str, list[_Page]] = {}
    for page in pages:
        if page.lost():
            by_reason.setdefault(page.unread, []).append(page)
    total = sum(page.lost() for group in by_reason.values() for page in group)
    if total < LOST_WARN_CHARS:
        return ""
    messages = []
    for reason, group in by_reason.items():
        count = sum(page.lost() for page in group)
        fonts = sorted({font for page in group for gap in page.gaps for font in gap.fonts})
        cause = ""
        if fonts:
            shown = ", ".join(fonts[:3]) + (", …" if len(fonts) > 3 else "")
            cause = f" (font{'s' if len(fonts) > 1 else ''} {shown} without a Unicode map)"
        message = (
            f"{count:,} unreadable characters on {_pages_label([p.number for p in group])}"
            f"{cause} were left out of the text"
        )
        messages.append(message + (f"; {reason}" if reason else ""))
    warnings.extend(messages)
    return "; ".join(messages)


def _pages_label(numbers: list[int]) -> str:
    """``page 3`` / ``pages 2, 5-7`` (at most WARN_RANGES ranges, then "…")."""
    ranges = page_ranges(numbers).split(", ")
    shown = ", ".join(ranges[:WARN_RANGES]) + (", …" if len(ranges) > WARN_RANGES else "")
    return f"page {shown}" if len(numbers) == 1 else f"pages {shown}"


def _ocr_plan(
    doc: Any, scanned: list[int], max_pixels: int, warnings: list[str]
) -> tuple[dict[int, int], str]:
    """The resolution to OCR each scanned page at within ``max_pixels`` (a page too
    large to render finely enough is left out); returns (page -> dpi, why left out)."""
    plan: dict[int, int] = {}
    refused: list[int] = []
    lowered: dict[int, list[int]] = {}
    too_large = ""
    for number in scanned:
        try:
            page = doc.load_page(number - 1)
            width, height = page.rect.width, page.rect.height
            floor = min(float(MIN_DPI), _scan_dpi(page))
        except Exception:  # an unreadable page: the OCR pass reports it
            plan[number] = OCR_DPI
            continue
        dpi = ocr_dpi(width, height, OCR_DPI, max_pixels, floor)
        if dpi is None:
            refused.append(number)
            too_large = too_large or too_large_reason(width, height, floor, max_pixels)
            continue
        plan[number] = dpi
        if dpi < OCR_DPI:
            lowered.setdefault(dpi, []).append(number)
    if refused:
        noun = "page" if len(refused) == 1 else "pages"
        warnings.append(f"{noun} {page_ranges(refused)} too large to OCR ({too_large})")
    for dpi, numbers in sorted(lowered.items()):
        noun = "page" if len(numbers) == 1 else "pages"
        warnings.append(
            f"{noun} {page_ranges(numbers)} OCR'd at {dpi} dpi (not {OCR_DPI}) to stay "
            "within [limits] max_image_pixels"
        )
    return plan, too_large
