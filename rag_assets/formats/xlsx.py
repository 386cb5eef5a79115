"""Excel workbooks (.xlsx / .xlsm) with openpyxl in read-only mode.

One section per sheet (``sheet=<name>``): rows as ``a | b | c`` lines, fully empty
rows skipped; the first row (usually the header) is kept on a line of its own,
separated from the data by a blank line. Formulas give their cached values (none
when the file was never calculated). At most ``max_rows_per_sheet`` rows are kept
per sheet; the rest are counted in a closing line and a warning.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from rag_assets.formats.archive import ZIP_ERRORS
from rag_assets.formats.docx import check_office_container, office_core_properties
from rag_assets.formats.model import (
    BodyBuilder,
    ItemError,
    ItemSkipped,
    ParsedDocument,
    ParseOptions,
)
from rag_assets.formats.text import markdown_safe, short_error

__all__ = ["parse_xlsx"]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds").removesuffix(" 00:00:00")
    if isinstance(value, date | time):
        return value.isoformat()
    return " ".join(str(value).split())


_ROW_TAG = re.compile(rb"<(?:\w+:)?row\b[^>]*?\br=\"(\d+)\"")


def _last_row_tag(data: bytes) -> int | None:
    """The row number of the last ``<row r="N">`` tag in ``data`` (searched backwards)."""
    end = len(data)
    while (start := data.rfind(b"<", 0, end)) >= 0:
        m = _ROW_TAG.match(data, start)
        if m:
            return int(m.group(1))
        end = start
    return None


def _last_row_number(sheet: Any) -> int | None:
    """The number of the sheet's last row, without parsing its cells.

    The ``<dimension>`` element says it when the writer set it (Excel, LibreOffice);
    else the last ``<row r="N">`` of the raw sheet XML is found by a backward byte
    search per chunk, far faster than letting openpyxl parse rows only to count them.
    """
    if sheet.max_row:
        return int(sheet.max_row)
    archive = getattr(sheet.parent, "_archive", None)
    member = getattr(sheet, "_worksheet_path", None)
    if archive is None or member is None:
        return None
    last: int | None = None
    tail = b""
    with archive.open(member) as xml:
        while chunk := xml.read(1 << 20):
            data = tail + chunk
            last = _last_row_tag(data) or last
            tail = data[-256:]  # a tag cut by the chunk boundary is found in the next one
    return last


def _sheet_text(sheet: Any, max_rows: int) -> tuple[str, int]:
    """(text, rows left out) of one worksheet."""
    lines: list[str] = []
    kept = 0
    omitted = 0
    for row_number, row in enumerate(sheet.iter_rows(values_only=True), start=1):
        cells = [_cell(v) for v in row]
        while cells and not cells[-1]:
            cells.pop()
        if not cells:
            continue
        if kept >= max_rows:
            # Rows past the cap are counted, not parsed: from the sheet's last row number.
            last = _last_row_number(sheet)
            if last is None:  # no row numbers to read: count by parsing after all
                rows = sheet.iter_rows(values_only=True)
                omitted = sum(1 for r in rows if any(_cell(v) for v in r)) - kept
            else:
                omitted = max(last - row_number + 1, 1)
            break
        lines.append(markdown_safe(" | ".join(cells)))
        if kept == 0:
            lines.append("")  # the header row is a paragraph of its own
        kept += 1
    if omitted:
        lines.append(f"… {omitted:,} more rows not indexed")
    return "\n".join(lines), omitted


def parse_xlsx(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    """Parse one .xlsx workbook into one section per sheet."""
    check_office_container(full_path, "XLSX", ".xls", options)
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        workbook = openpyxl.load_workbook(
            str(full_path), read_only=True, data_only=True, keep_links=False
        )
    except (InvalidFileException, *ZIP_ERRORS):
        raise ItemError(
            "not a valid XLSX (truncated, or not a ZIP package); re-save it in Excel or LibreOffice"
        ) from None
    except (KeyError, ValueError, TypeError, OSError, SyntaxError) as exc:
        # lxml's and ElementTree's parse errors are SyntaxError subclasses
        raise ItemError(
            f"damaged XLSX ({short_error(exc, full_path)}); re-save it in Excel or LibreOffice"
        ) from None
    builder = BodyBuilder()
    warnings: list[str] = []
    capped: list[str] = []
    broken: list[str] = []
    try:
        for sheet in workbook.worksheets:
            name = str(sheet.title)
            try:
                text, omitted = _sheet_text(sheet, options.max_rows_per_sheet)
            except (KeyError, ValueError, TypeError, SyntaxError, *ZIP_ERRORS):
                broken.append(name)
                continue
            if omitted:
                capped.append(f"{name!r} ({omitted:,} rows)")
            if builder.chars + len(text) > options.max_chars:
                warnings.append(
                    f"text cut at {options.max_chars:,} characters (sheet {name!r}); "
                    "split the workbook to index the rest"
                )
                break
            builder.add(f"sheet={name}", f"Sheet {name}", text, (name,))
        metadata, created, updated, core_title = office_core_properties(full_path)
        metadata["sheet_count"] = len(workbook.worksheets)
    finally:
        workbook.close()
    if capped:
        warnings.append(
            f"only the first {options.max_rows_per_sheet:,} rows of each sheet are indexed; "
            f"left out: {', '.join(capped)}"
        )
    if broken:
        warnings.append(f"sheets {', '.join(map(repr, broken))} could not be read; skipped")
    if not builder.sections:
        raise ItemSkipped("no values in any sheet")
    return builder.document(
        title=core_title,
        metadata=metadata,
        created=created,
        updated=updated,
        warnings=tuple(warnings),
    )
