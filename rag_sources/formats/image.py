"""Images (PNG, JPEG, TIFF including multi-page TIFF): text by OCR only.

PyMuPDF opens the image as a document (one page per frame) and OCRs each page at
the image's own resolution (kept within 100-400 dpi) by the same OCR path as
scanned PDF pages. An image always needs OCR, so in a first pass
(``allow_deferred_work=False``) the result is an empty body with the OCR recorded
in ``deferred``.

Decoding a frame costs its pixels whatever the file size (a 109 kB PNG can declare
30,000 × 30,000): each frame's size is read from its header (MuPDF loads a page's
image information without decoding it) and a frame over ``[limits]
max_image_pixels`` is left out, in the first pass already. At most
``[limits] max_image_frames`` frames of one file are read.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
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
)
from rag_sources.formats.pdf import MAX_PROFILE_BYTES, OCR_MIN_CHARS, pymupdf_module, text_blocks
from rag_sources.formats.text import markdown_safe, require_content, short_error

__all__ = ["parse_image"]


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_without_big_profile(full_path: Path) -> bytes | None:
    """The PNG's bytes without its iCCP chunk when that colour profile inflates past
    ``MAX_PROFILE_BYTES`` (MuPDF inflates it whole); None when there is nothing to cut.

    Only the chunk headers before the image data are read, and the profile is
    inflated a chunk at a time up to the cap.
    """
    try:
        with full_path.open("rb") as f:
            if f.read(8) != _PNG_SIGNATURE:
                return None
            while header := f.read(8):
                if len(header) < 8:
                    return None
                length, kind = struct.unpack(">I4s", header)
                if kind in (b"IDAT", b"IEND"):
                    return None  # the profile comes before the image data, or not at all
                if kind != b"iCCP":
                    f.seek(length + 4, 1)
                    continue
                start = f.tell() - 8
                profile = f.read(length)
                if not _inflates_past(profile.partition(b"\x00")[2][1:], MAX_PROFILE_BYTES):
                    return None
                f.seek(0)
                data = f.read()
                return data[:start] + data[start + 12 + length :]
    except (OSError, struct.error):
        return None
    return None


def _inflates_past(packed: bytes, cap: int) -> bool:
    inflater = zlib.decompressobj()
    produced = 0
    try:
        while packed and not inflater.eof:
            produced += len(inflater.decompress(packed, 1 << 16))
            if produced > cap:
                return True
            packed = inflater.unconsumed_tail
    except zlib.error:
        return False  # a broken profile: MuPDF ignores it
    return False


def _open(full_path: Path, warnings: list[str] | None = None) -> Any:
    pymupdf = pymupdf_module()
    require_content(full_path)
    stripped = _png_without_big_profile(full_path)
    if stripped is not None and warnings is not None:
        warnings.append(
            f"the image's colour profile decodes to more than {MAX_PROFILE_BYTES >> 20} MiB; "
            "not loaded"
        )
    try:
        doc = pymupdf.open(full_path) if stripped is None else pymupdf.open("png", stripped)
    except pymupdf.EmptyFileError:
        raise ItemSkipped("empty file") from None
    except (pymupdf.FileDataError, RuntimeError, ValueError) as exc:
        raise ItemError(
            f"not a readable image ({short_error(exc, full_path)}); re-save the image or exclude it"
        ) from None
    if doc.page_count == 0:
        doc.close()
        raise ItemError("not a readable image (no frames); re-save the image or exclude it")
    return doc


def _size(page: Any) -> tuple[int, int, float]:
    """(width, height, dots per inch) of the image on ``page``, from its header."""
    try:
        infos = page.get_image_info()
    except Exception:  # a frame MuPDF cannot describe: decoding it would fail too
        return 0, 0, 0.0
    if not infos:
        return 0, 0, 0.0
    info = max(infos, key=lambda i: int(i.get("width", 0)) * int(i.get("height", 0)))
    width, height = int(info.get("width", 0)), int(info.get("height", 0))
    own = width * 72 / page.rect.width if page.rect.width > 0 else float(OCR_DPI)
    return width, height, own


def parse_image(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """OCR one image file into one section per frame (``page=N``)."""
    if options.ocr == "off":
        # Still check the file, so an empty or broken one says so.
        _open(full_path).close()
        raise ItemSkipped("image without text layer; OCR is off for this source")
    warnings: list[str] = []
    doc = _open(full_path, warnings)
    try:
        frames = doc.page_count
        frame_note = ""
        most = options.limits.max_image_frames
        if frames > most:
            frame_note = (
                f"only the first {most:,} of {frames:,} frames are read; split the file or "
                "raise [limits] max_image_frames to index the rest"
            )
            warnings.append(frame_note)
        pages = _within_cap(doc, min(frames, most), options, warnings)
        reason = ocr_available(options.ocr_languages)
        if reason:
            raise ItemSkipped(f"image without text layer; {reason}")
        metadata: dict[str, Any] = {"page_count": frames}
        if not options.allow_deferred_work:
            return ParsedDocument(
                body="",
                metadata=metadata,
                warnings=tuple(warnings),
                deferred=(deferred_description(pages),),
            )
        try:
            return _ocr(doc, pages, metadata, options, warnings)
        except ItemSkipped as exc:
            if frame_note:  # say so even when nothing was found
                raise ItemSkipped(f"{exc} ({frame_note})") from None
            raise
    finally:
        doc.close()


def _within_cap(doc: Any, count: int, options: ParseOptions, warnings: list[str]) -> list[int]:
    """The frames (1-based) whose pixels are within ``max_image_pixels``; the others
    are named in a warning, or the image is skipped when no frame is left."""
    cap = options.limits.max_image_pixels
    pages: list[int] = []
    too_large: list[tuple[int, int, int]] = []
    for number in range(1, count + 1):
        try:
            width, height, _own = _size(doc.load_page(number - 1))
        except Exception:  # damaged: the OCR pass says so (or the first pass defers it)
            width = height = 0
        if width * height > cap:
            too_large.append((number, width, height))
        else:
            pages.append(number)
    if not too_large:
        return pages
    _, width, height = max(too_large, key=lambda t: t[1] * t[2])
    what = (
        f"{width:,} × {height:,} pixels, {width * height / 1e6:,.1f} Mpx, more than "
        f"[limits] max_image_pixels ({cap / 1e6:,.1f} Mpx)"
    ).replace(".0 Mpx", " Mpx")
    if not pages:
        noun = "image" if count == 1 else f"all {count:,} frames of the image"
        raise ItemSkipped(f"{noun} too large to decode ({what}); raise the limit to OCR it")
    numbers = [n for n, _, _ in too_large]
    noun = "page" if len(numbers) == 1 else "pages"
    warnings.append(f"{noun} {page_ranges(numbers)} too large to decode ({what}); not OCR'd")
    return pages


def _ocr(
    doc: Any,
    pages: list[int],
    metadata: dict[str, Any],
    options: ParseOptions,
    warnings: list[str],
) -> ParsedDocument:
    builder = BodyBuilder()
    done: list[int] = []
    failed: list[int] = []
    first_error = ""
    cap = options.limits.max_image_pixels
    for number in pages:
        try:
            page = doc.load_page(number - 1)
            _width, _height, own = _size(page)
            # The image's own resolution within 100-400 dpi, never finer than the cap allows.
            wanted = max(MIN_DPI, min(MAX_DPI, round(own))) if own > 0 else OCR_DPI
            floor = min(MIN_DPI, own) if own > 0 else MIN_DPI
            dpi = ocr_dpi(page.rect.width, page.rect.height, wanted, cap, floor)
            if dpi is None:
                failed.append(number)
                first_error = first_error or too_large_reason(
                    page.rect.width, page.rect.height, floor, cap
                )
                continue
            textpage = ocr_textpage(page, options, dpi)
            blocks = text_blocks(textpage.extractDICT(), ocr=True)
        except Exception as exc:  # damaged pixel data or a Tesseract failure: that frame only
            failed.append(number)
            first_error = first_error or short_error(exc)
            continue
        if sum(c.isalnum() for b in blocks for line in b.lines for c in line) < OCR_MIN_CHARS:
            continue
        text = "\n\n".join(
            "\n".join(filter(None, (markdown_safe(line) for line in block.lines)))
            for block in blocks
        )
        if builder.add(f"page={number}", f"Page {number}", text, ocr=True):
            done.append(number)
    if failed:
        warnings.append(
            f"pages {page_ranges(failed)} could not be read or OCR'd ({first_error}); "
            "they were not indexed"
        )
    if not done:
        if failed:
            raise ItemError(
                f"cannot decode or OCR the image ({first_error}); re-save the image or exclude it"
            )
        raise ItemSkipped("no text found by OCR in the image")
    metadata["ocr_pages"] = done
    return builder.document(title=None, metadata=metadata, warnings=tuple(warnings))
