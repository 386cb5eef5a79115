"""PowerPoint presentations (.pptx) with python-pptx.

One section per slide (``slide=N``, label ``Slide N: <title>``): the title, the text
of every shape in reading order (top to bottom, then left to right; group shapes
recursed), tables as ``a | b | c`` rows, then the speaker notes after ``Notes:``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rag_sources.formats.archive import ZIP_ERRORS
from rag_sources.formats.docx import check_office_container, office_core_properties
from rag_sources.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    ParsedDocument,
    ParseOptions,
)
from rag_sources.formats.text import markdown_safe, short_error

__all__ = ["parse_pptx"]


def _lines(text: str) -> list[str]:
    return [line for line in (markdown_safe(x) for x in text.split("\n")) if line]


def _ordered(shapes: Iterable[Any]) -> list[Any]:
    def key(shape: Any) -> tuple[int, int]:
        try:
            return (int(shape.top or 0), int(shape.left or 0))
        except (AttributeError, TypeError, ValueError):
            return (0, 0)

    return sorted(shapes, key=key)


def _shape_text(shapes: Iterable[Any], skip: Any) -> Iterator[str]:
    """Text blocks of ``shapes`` in reading order (``skip``: the title shape)."""
    for shape in _ordered(shapes):
        if skip is not None and shape.shape_id == skip:
            continue
        if getattr(shape, "shapes", None) is not None and shape.shape_type == 6:  # GROUP
            yield from _shape_text(shape.shapes, skip)
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = []
            for row in shape.table.rows:
                cells = [" ".join(cell.text.split()) for cell in row.cells]
                if any(cells):
                    rows.append(markdown_safe(" | ".join(cells)))
            if rows:
                yield "\n".join(rows)
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            lines = _lines(shape.text_frame.text)
            if lines:
                yield "\n".join(lines)


def _slide(slide: Any) -> tuple[str | None, str]:
    """(title, text) of one slide."""
    title_shape = None
    title: str | None = None
    try:
        title_shape = slide.shapes.title
    except (KeyError, AttributeError):
        title_shape = None
    if title_shape is not None and title_shape.has_text_frame:
        title = " ".join(title_shape.text_frame.text.split()) or None
    blocks = [title] if title else []
    blocks.extend(_shape_text(slide.shapes, title_shape.shape_id if title_shape else None))
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = _lines(frame.text) if frame is not None else []
        if notes:
            blocks.append("Notes: " + "\n".join(notes))
    return title, "\n\n".join(blocks)


def parse_pptx(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """Parse one .pptx file into one section per slide."""
    check_office_container(full_path, "PPTX", ".ppt", options)
    import pptx
    from lxml.etree import LxmlError
    from pptx.exc import PackageNotFoundError

    try:
        presentation = pptx.Presentation(str(full_path))
    except (PackageNotFoundError, *ZIP_ERRORS):
        raise ItemError(
            "not a valid PPTX (truncated, or not a ZIP package); "
            "re-save it in PowerPoint or LibreOffice"
        ) from None
    except (KeyError, ValueError, LxmlError, OSError) as exc:
        raise ItemError(
            f"damaged PPTX ({short_error(exc, full_path)}); re-save it in PowerPoint or LibreOffice"
        ) from None
    builder = BodyBuilder()
    warnings: list[str] = []
    broken: list[int] = []
    count = 0
    first_title: str | None = None
    try:
        slides = list(presentation.slides)
    except (KeyError, ValueError, AttributeError, TypeError, LxmlError) as exc:
        raise ItemError(
            f"damaged PPTX ({short_error(exc, full_path)}); re-save it in PowerPoint or LibreOffice"
        ) from None
    for number, slide in enumerate(slides, start=1):
        count = number
        try:
            title, text = _slide(slide)
        except (KeyError, ValueError, AttributeError, TypeError, IndexError, LxmlError):
            # one damaged slide costs that slide
            broken.append(number)
            continue
        if builder.chars + len(text) > options.max_chars:
            warnings.append(
                f"text cut at {options.max_chars:,} characters (slide {number}); "
                "split the presentation to index the rest"
            )
            break
        if number == 1:
            first_title = title
        label = f"Slide {number}: {title}" if title else f"Slide {number}"
        builder.add(f"slide={number}", label, text, (title,) if title else ())
    if broken:
        warnings.append(f"slides {', '.join(map(str, broken))} could not be read; skipped")
    if not builder.sections:
        raise ItemSkipped("no text on any slide")
    metadata, created, updated, core_title = office_core_properties(full_path)
    metadata["slide_count"] = count
    return builder.document(
        title=core_title or first_title,
        metadata=metadata,
        created=created,
        updated=updated,
        warnings=tuple(warnings),
    )
