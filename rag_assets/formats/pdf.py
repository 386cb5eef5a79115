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

from rag_assets.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    ParsedDocument,
    ParseOptions,
)
from rag_assets.formats.ocr import (
    MIN_DPI,
    OCR_DPI,
    deferred_description,
    ocr_available,
    ocr_dpi,
    ocr_textpage,
    page_ranges,
    too_large_reason,
)
from rag_assets.formats.text import (
    heading_line,
    is_placeholder_title,
    markdown_safe,
    require_content,
    short_error,
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


@dataclass(frozen=True)
class Block:
    """One text block of a page: its lines and the smallest font size among them."""

    lines: tuple[str, ...]
    size: float


@dataclass
class _Page:
    number: int
    blocks: list[Block]
    heading_path: tuple[str, ...] = ()
    ocr: bool = False


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

    With ``ocr``, lines without a letter or digit are dropped (Tesseract reads specks
    and rules on a scan as stray punctuation).
    """
    blocks: list[Block] = []
    for block in textpage_dict.get("blocks", ()):
        if block.get("type", 0) != 0:
            continue
        lines: list[str] = []
        size = 0.0
        for line in block.get("lines", ()):
            spans = line.get("spans", ())
            text = "".join(span.get("text", "") for span in spans).strip()
            if not text or (ocr and not any(c.isalnum() for c in text)):
                continue
            # the size of the span holding most of the line (a superscript is no heading)
            main = max(spans, key=lambda s: len(s.get("text", "").strip()))
            line_size = float(main.get("size", 0.0))
            size = line_size if not lines else min(size, line_size)
            lines.append(text)
        if lines:
            blocks.append(Block(tuple(lines), round(size, 1)))
    return blocks


def _body_size(pages: list[_Page]) -> float:
    sizes: Counter[float] = Counter()
    for page in pages:
        if page.ocr:
            continue
        for block in page.blocks:
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
    blocks = [b for p in pages if not p.ocr for b in p.blocks]
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
    unreadable: list[int] = []
    chars = 0
    last_read = page_count
    resources = _Resources(pymupdf, doc)
    for index in range(page_count):
        number = index + 1
        try:
            page = doc.load_page(index)
            height = page.rect.height
            resources.check_fonts(page)
            blocks = text_blocks(page.get_textpage(flags=flags).extractDICT())
        except Exception:  # one broken page content stream must not cost the document
            unreadable.append(number)
            continue
        path = _page_path(stack, outline.get(number, []), height) if outline else ()
        if blocks:
            pages.append(_Page(number, blocks, path))
            chars += sum(len(line) + 1 for b in blocks for line in b.lines)
        else:
            resources.check_profiles(page)  # before MuPDF reads the images' colour spaces
            if _needs_ocr(page):
                scanned.append(number)
                scanned_paths[number] = path
        del page
        if chars > options.max_chars:
            last_read = number
            break
    if unreadable:
        warnings.append(f"pages {page_ranges(unreadable)} could not be read; skipped")
    warnings.extend(resources.warnings())

    deferred: tuple[str, ...] = ()
    ocr_pages: list[int] = []
    too_large = ""
    if scanned:
        deferred, ocr_pages, too_large = _handle_scanned(
            doc, scanned, pages, scanned_paths, options, warnings
        )

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
        if unreadable:
            raise ItemError(
                f"no page could be read (pages {page_ranges(unreadable)} failed); "
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
        builder.add(f"page={page.number}", f"Page {page.number}", text, page.heading_path, page.ocr)
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


def _handle_scanned(
    doc: Any,
    scanned: list[int],
    pages: list[_Page],
    paths: dict[int, tuple[str, ...]],
    options: ParseOptions,
    warnings: list[str],
) -> tuple[tuple[str, ...], list[int], str]:
    """OCR (or defer, or report) the pages without a text layer; returns (deferred,
    done, why pages were too large to OCR)."""
    what = f"{len(scanned)} page{'s' if len(scanned) > 1 else ''} ({page_ranges(scanned)})"
    if options.ocr == "off":
        if pages:
            warnings.append(f"{what} have no text layer and were not indexed; OCR is off")
        return (), [], ""
    reason = ocr_available(options.ocr_languages)
    if reason:
        if pages:
            warnings.append(f"{reason}; {what} without a text layer were not indexed")
        return (), [], ""
    plan, too_large = _ocr_plan(doc, scanned, options.limits.max_image_pixels, warnings)
    if not plan:
        return (), [], too_large
    if not options.allow_deferred_work:
        return (deferred_description(sorted(plan)),), [], too_large
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
    pages.sort(key=lambda p: p.number)
    if failed:
        warnings.append(f"OCR failed on pages {page_ranges(failed)}; they were not indexed")
    empty = sorted(set(plan) - set(done) - set(failed))
    if empty:
        warnings.append(f"OCR found no text on pages {page_ranges(empty)}")
    return (), done, too_large


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
