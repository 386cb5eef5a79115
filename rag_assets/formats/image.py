"""Images (PNG, JPEG, TIFF including multi-page TIFF): text by OCR only.

PyMuPDF opens the image as a document (one page per frame); each page is turned
into a one-page PDF and recognised at the image's own resolution (kept within
100-400 dpi) by the same OCR path as scanned PDF pages. An image always needs OCR,
so in a first pass (``allow_deferred_work=False``) the result is an empty body
with the OCR recorded in ``deferred``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rag_assets.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    ParsedDocument,
    ParseOptions,
)
from rag_assets.formats.ocr import (
    OCR_DPI,
    deferred_description,
    ocr_available,
    ocr_textpage,
    page_ranges,
)
from rag_assets.formats.pdf import OCR_MIN_CHARS, pymupdf_module, text_blocks
from rag_assets.formats.text import markdown_safe, require_content, short_error

__all__ = ["parse_image"]


def _open(full_path: Path) -> Any:
    pymupdf = pymupdf_module()
    require_content(full_path)
    try:
        doc = pymupdf.open(full_path)
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


def _dpi(page: Any) -> int:
    """The resolution at which ``page`` shows its image pixel for pixel."""
    try:
        infos = page.get_image_info()
        width = max((int(i.get("width", 0)) for i in infos), default=0)
    except Exception:
        width = 0
    if width <= 0 or page.rect.width <= 0:
        return OCR_DPI
    return round(width * 72 / page.rect.width)


def parse_image(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """OCR one image file into one section per frame (``page=N``)."""
    if options.ocr == "off":
        # Still check the file, so an empty or broken one says so.
        _open(full_path).close()
        raise ItemSkipped("image without text layer; OCR is off for this source")
    doc = _open(full_path)
    try:
        pages = list(range(1, doc.page_count + 1))
        reason = ocr_available(options.ocr_languages)
        if reason:
            raise ItemSkipped(f"image without text layer; {reason}")
        metadata: dict[str, Any] = {"page_count": len(pages)}
        if not options.allow_deferred_work:
            return ParsedDocument(
                body="", metadata=metadata, deferred=(deferred_description(pages),)
            )
        return _ocr(doc, pages, metadata, options, full_path)
    finally:
        doc.close()


def _ocr(
    doc: Any, pages: list[int], metadata: dict[str, Any], options: ParseOptions, full_path: Path
) -> ParsedDocument:
    pymupdf = pymupdf_module()
    builder = BodyBuilder()
    done: list[int] = []
    failed: list[int] = []
    first_error = ""
    for number in pages:
        try:
            pdf = pymupdf.open("pdf", doc.convert_to_pdf(number - 1, number - 1))
            try:
                page = pdf.load_page(0)
                textpage = ocr_textpage(page, options, _dpi(page))
                blocks = text_blocks(textpage.extractDICT(), ocr=True)
            finally:
                pdf.close()
        except Exception as exc:  # damaged pixel data or a Tesseract failure: that frame only
            failed.append(number)
            first_error = first_error or short_error(exc, full_path)
            continue
        if sum(c.isalnum() for b in blocks for line in b.lines for c in line) < OCR_MIN_CHARS:
            continue
        text = "\n\n".join(
            "\n".join(filter(None, (markdown_safe(line) for line in block.lines)))
            for block in blocks
        )
        if builder.add(f"page={number}", f"Page {number}", text, ocr=True):
            done.append(number)
    warnings: list[str] = []
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
