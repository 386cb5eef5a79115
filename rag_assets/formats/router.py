"""File type by extension, and the parser for each type.

The file-based source kinds route every file through here; the stages never look
at a file type. ``PARSER_VERSIONS`` records each parser's version: bump one and only
the files of that type are parsed again (parsed output is cached by content hash and
parser version). Parser modules are imported on first use, so importing the router
stays cheap (no PyMuPDF, lxml or office libraries).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from rag_assets.formats.model import ParsedDocument, ParseOptions
from rag_serving.search.filters import TYPE_ALIASES as FILTER_TYPE_ALIASES

# extension (lowercase, with the dot) -> file type
FILE_TYPES: dict[str, str] = {
    ".md": "md",
    ".markdown": "md",
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".epub": "epub",
    ".txt": "txt",
    ".text": "txt",
    ".log": "txt",
    ".csv": "csv",
    ".tsv": "csv",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".rst": "rst",
    ".png": "png",
    ".jpg": "jpg",
    ".jpeg": "jpg",
    ".tif": "tiff",
    ".tiff": "tiff",
}

# file type -> parser version ("<type>/<n>"); part of the parse cache key
PARSER_VERSIONS: dict[str, str] = {
    "md": "md/2",  # 2: links to documents (paper.pdf) kept
    "pdf": "pdf/1",
    "docx": "docx/1",
    "pptx": "pptx/1",
    "xlsx": "xlsx/1",
    "html": "html/1",
    "epub": "epub/1",
    "txt": "txt/1",
    "csv": "csv/1",
    "json": "json/1",
    "yaml": "yaml/1",
    "rst": "rst/1",
    "png": "png/1",
    "jpg": "jpg/1",
    "tiff": "tiff/1",
}

# names people use for a type -> the type (for `--type`); search validates them too
TYPE_ALIASES = FILTER_TYPE_ALIASES

# types whose parse may run OCR (costly work that a first pass defers)
OCR_TYPES: tuple[str, ...] = ("pdf", "png", "jpg", "tiff")

Parser = Callable[[Path, str, ParseOptions], ParsedDocument]


def file_type(path: str) -> str | None:
    """The file type of ``path`` by its extension (None when no parser handles it)."""
    return FILE_TYPES.get(PurePosixPath(path).suffix.lower())


def _parse_markdown(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.markdown import parse_markdown_document

    return parse_markdown_document(full_path.read_bytes(), rel_path)


def _parse_pdf(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.pdf import parse_pdf

    return parse_pdf(full_path, rel_path, options)


def _parse_docx(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.docx import parse_docx

    return parse_docx(full_path, rel_path, options)


def _parse_pptx(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.pptx import parse_pptx

    return parse_pptx(full_path, rel_path, options)


def _parse_xlsx(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.xlsx import parse_xlsx

    return parse_xlsx(full_path, rel_path, options)


def _parse_html(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.html import parse_html

    return parse_html(full_path, rel_path, options)


def _parse_epub(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.epub import parse_epub

    return parse_epub(full_path, rel_path, options)


def _parse_text(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.text import parse_text

    return parse_text(full_path, rel_path, options)


def _parse_image(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.image import parse_image

    return parse_image(full_path, rel_path, options)


PARSERS: dict[str, Parser] = {
    "md": _parse_markdown,
    "pdf": _parse_pdf,
    "docx": _parse_docx,
    "pptx": _parse_pptx,
    "xlsx": _parse_xlsx,
    "html": _parse_html,
    "epub": _parse_epub,
    "txt": _parse_text,
    "csv": _parse_text,
    "json": _parse_text,
    "yaml": _parse_text,
    "rst": _parse_text,
    "png": _parse_image,
    "jpg": _parse_image,
    "tiff": _parse_image,
}


def parse_file(
    full_path: Path, rel_path: str, type_name: str, options: ParseOptions
) -> ParsedDocument:
    """Parse the file at ``full_path`` (shown as ``rel_path``) as ``type_name``.

    Raises ``ItemSkipped`` / ``ItemError`` with a one-line reason for files that
    cannot be indexed; any other exception is a parser bug.
    """
    return PARSERS[type_name](full_path, rel_path, options)
