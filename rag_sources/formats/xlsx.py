"""Excel workbooks (.xlsx / .xlsm) with openpyxl in read-only mode.

One section per sheet (``sheet=<name>``): rows as ``a | b | c`` lines, fully empty
rows skipped; the first row (usually the header) is kept on a line of its own,
separated from the data by a blank line. Formulas give their cached values (none
when the file was never calculated).

Bounded by the source's ``[limits]``: at most ``max_rows_per_sheet`` rows
(``max_sheet_rows``) are kept per sheet, the rest counted in a closing line and a
warning; at most ``max_sheet_columns`` columns, the rest cut before openpyxl parses
their cells (a row may hold 16,384); and the cells read per workbook, empty or not,
stop at ``CELL_BUDGET_FACTOR`` × rows × columns. Rows are read with openpyxl's own
sheet parser, never through the worksheet's ``<dimension>``: read-only mode trusts
that element, and a stale ``A1:A1`` hid every row but one (and a row numbered a
billion made it yield a billion empty rows first).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time
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

    The last ``<row r="N">`` of the raw sheet XML, found by a backward byte search per
    chunk: far faster than letting openpyxl parse rows only to count them, and unlike
    the ``<dimension>`` element never stale.
    """
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


_COLUMN = re.compile(r"^\$?([A-Za-z]{1,3})")
# Cells read per workbook (empty ones and cut-off rows too): this many full sheets.
CELL_BUDGET_FACTOR = 2


def _column_number(reference: str | None) -> int:
    """``"XFD7"`` -> 16384 (0 when there is no reference)."""
    from openpyxl.utils.cell import column_index_from_string

    m = _COLUMN.match(reference or "")
    try:
        return column_index_from_string(m.group(1).upper()) if m else 0
    except ValueError:
        return 0


def _row_parser(sheet: Any, max_columns: int) -> Any:
    """openpyxl's parser for ``sheet``'s XML, cutting each row to ``max_columns`` cells
    before they are parsed (``widest``: the last column of a row it cut)."""
    from openpyxl.worksheet._reader import WorkSheetParser

    class _Parser(WorkSheetParser):  # type: ignore[misc]
        widest = 0
        row_width = 0  # cells in the last row as written (what reading it cost)

        def parse_row(self, row: Any) -> Any:
            self.row_width = len(row)
            if len(row) > max_columns:
                self.widest = max(self.widest, _column_number(row[-1].get("r")), len(row))
                del row[max_columns:]
            return super().parse_row(row)

    workbook = sheet.parent
    return _Parser(
        sheet._get_source(),
        sheet._shared_strings,
        data_only=workbook.data_only,
        epoch=workbook.epoch,
        date_formats=workbook._date_formats,
        timedelta_formats=workbook._timedelta_formats,
    )


class _Budget:
    """Cells left to read in the workbook."""

    def __init__(self, cells: int) -> None:
        self.left = cells
        self.exhausted = False


def _sheet_text(
    sheet: Any, max_rows: int, max_columns: int, budget: _Budget, last_rows: dict[str, Any]
) -> tuple[str, int, int]:
    """(text, rows left out, widest column left out) of one worksheet.

    Every cell as written costs the budget, kept or cut: the sheet's XML elements
    all pass through openpyxl's parser loop, whether their cells are parsed or not.
    """
    lines: list[str] = []
    kept = 0
    omitted = 0
    widest = 0
    parser = _row_parser(sheet, max_columns)
    try:
        for row_number, cells in parser.parse():
            if budget.left <= 0:
                budget.exhausted = True
                break
            budget.left -= max(1, parser.row_width)
            values: dict[int, str] = {}
            for cell in cells:
                column = int(cell["column"])
                if column > max_columns:
                    widest = max(widest, column)
                    continue
                text = _cell(cell["value"])
                if text:
                    values[column] = text
            if not values:
                continue
            if kept >= max_rows:
                # Rows past the cap are counted, not parsed: from the sheet's last row number.
                path = sheet._worksheet_path
                if path not in last_rows:
                    last_rows[path] = _last_row_number(sheet)
                last = last_rows[path]
                omitted = max((last or row_number) - row_number + 1, 1)
                break
            row = [values.get(column, "") for column in range(1, max(values) + 1)]
            lines.append(markdown_safe(" | ".join(row)))
            if kept == 0:
                lines.append("")  # the header row is a paragraph of its own
            kept += 1
    finally:
        parser.source.close()
    if omitted:
        lines.append(f"… {omitted:,} more rows not indexed")
    return "\n".join(lines), omitted, max(widest, parser.widest)


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
    wide: list[str] = []
    broken: list[str] = []
    unread: list[str] = []
    max_rows = options.max_rows_per_sheet
    max_columns = options.limits.max_sheet_columns
    budget = _Budget(CELL_BUDGET_FACTOR * max_rows * max_columns)
    last_rows: dict[str, Any] = {}  # a sheet's XML may be listed under several names
    try:
        for sheet in workbook.worksheets:
            name = str(sheet.title)
            if budget.exhausted or budget.left <= 0:
                unread.append(name)
                continue
            try:
                text, omitted, widest = _sheet_text(sheet, max_rows, max_columns, budget, last_rows)
            except (KeyError, ValueError, TypeError, SyntaxError, *ZIP_ERRORS):
                broken.append(name)
                continue
            if budget.exhausted:
                warnings.append(
                    f"sheet {name!r} read in part: the workbook's cell budget "
                    f"({CELL_BUDGET_FACTOR} × [limits] max_sheet_rows × max_sheet_columns) "
                    "ran out"
                )
            if omitted:
                capped.append(f"{name!r} ({omitted:,} rows)")
            if widest:
                wide.append(f"{name!r} (to column {widest:,})")
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
            f"only the first {max_rows:,} rows of each sheet are indexed; "
            f"left out: {', '.join(capped)}"
        )
    if wide:
        warnings.append(
            f"only the first {max_columns:,} columns of each sheet are indexed "
            f"([limits] max_sheet_columns); left out: {', '.join(wide)}"
        )
    if unread:
        warnings.append(
            f"{len(unread):,} sheets not read ({', '.join(map(repr, unread[:5]))}"
            f"{' ...' if len(unread) > 5 else ''}): the workbook's cell budget "
            f"({CELL_BUDGET_FACTOR} × [limits] max_sheet_rows × max_sheet_columns, "
            f"{CELL_BUDGET_FACTOR * max_rows * max_columns:,} cells) ran out"
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
