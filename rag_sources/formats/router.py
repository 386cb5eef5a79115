"""File type by extension, and the parser for each type.

The file-based source kinds route every file through here; the stages never look
at a file type. ``PARSER_VERSIONS`` records each parser's version: bump one and only
the files of that type are parsed again (parsed output is cached by content hash and
parser version). Parser modules are imported on first use, so importing the router
stays cheap (no PyMuPDF, lxml or office libraries).
"""

from __future__ import annotations

import hashlib
import importlib
import re
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path, PurePosixPath

from rag_sources.formats.model import ItemError, ItemSkipped, ParsedDocument, ParseOptions

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
    "md": "md/3",  # 2: links to documents (paper.pdf) kept; 3: dated by frontmatter or name
    "pdf": "pdf/3",  # 3: unreadable text left out or OCR'd, RTL ligatures in order, XFA forms
    "docx": "docx/2",  # 2: zip packages checked against the unpack caps
    "pptx": "pptx/2",  # 2: zip packages checked against the unpack caps
    "xlsx": "xlsx/2",  # 2: never the stale <dimension>; columns capped; zip checks
    "html": "html/3",  # 2: nesting capped, DTD subsets cut out; 3: stale charsets lose to UTF-8
    "epub": "epub/3",  # 2: zip checks; 3: sections by the contents, chapters as html/3
    "txt": "txt/1",
    "csv": "csv/1",
    "json": "json/1",
    "yaml": "yaml/1",
    "rst": "rst/1",
    "png": "png/2",  # 2: pixel cap from the header, OCR through MuPDF's OCR device
    "jpg": "jpg/2",
    "tiff": "tiff/2",  # 2: also at most [limits] max_image_frames frames
}

# types whose parse may run OCR (costly work that a first pass defers)
OCR_TYPES: tuple[str, ...] = ("pdf", "png", "jpg", "tiff")

Parser = Callable[[Path, str, ParseOptions], ParsedDocument]


def file_type(path: str) -> str | None:
    """The file type of ``path`` by its extension (None when no parser handles it)."""
    return FILE_TYPES.get(PurePosixPath(path).suffix.lower())


# file type -> "module:function" of its parser, imported on first use
PARSERS: dict[str, str] = {
    "md": "rag_sources.formats.markdown:parse_markdown_file",
    "pdf": "rag_sources.formats.pdf:parse_pdf",
    "docx": "rag_sources.formats.docx:parse_docx",
    "pptx": "rag_sources.formats.pptx:parse_pptx",
    "xlsx": "rag_sources.formats.xlsx:parse_xlsx",
    "html": "rag_sources.formats.html:parse_html",
    "epub": "rag_sources.formats.epub:parse_epub",
    **dict.fromkeys(("txt", "csv", "json", "yaml", "rst"), "rag_sources.formats.text:parse_text"),
    **dict.fromkeys(("png", "jpg", "tiff"), "rag_sources.formats.image:parse_image"),
}


@cache
def _parser(type_name: str) -> Parser:
    module, _, function = PARSERS[type_name].partition(":")
    return getattr(importlib.import_module(module), function)


def parse_file(
    full_path: Path, rel_path: str, type_name: str, options: ParseOptions
) -> ParsedDocument:
    """Parse the file at ``full_path`` (shown as ``rel_path``) as ``type_name``.

    Raises ``ItemSkipped`` / ``ItemError`` with a one-line reason for files that
    cannot be indexed; any other exception is a parser bug.
    """
    return _parser(type_name)(full_path, rel_path, options)


# a suffix kept on a temporary file's name: short, and safe on every file system
_SAFE_SUFFIX = re.compile(r"^\.[A-Za-z0-9]{1,10}$")


def parse_bytes(
    data: bytes, name: str, rel_path: str, type_name: str, options: ParseOptions
) -> ParsedDocument:
    """Parse content that is not a file of its own (a git blob, a mail attachment) as
    ``type_name``: the parsers read files, so it is written to a private temporary
    folder first.

    The temporary file is named by the content's hash (an attachment's name may be
    too long for the file system, or hold a NUL), keeping ``name``'s suffix only when
    it is short and plain; library messages that quote the temporary file name the
    item by ``rel_path``'s last part instead.
    """
    suffix = PurePosixPath(name).suffix
    if not _SAFE_SUFFIX.match(suffix):
        suffix = f".{type_name}"
    stem = hashlib.sha256(data).hexdigest()[:24]
    with tempfile.TemporaryDirectory(prefix="ragline-item-") as folder:
        path = Path(folder) / f"{stem}{suffix}"
        path.write_bytes(data)
        try:
            return parse_file(path, rel_path, type_name, options)
        except (ItemSkipped, ItemError) as exc:
            message = str(exc)
            shown = _shown_name(rel_path)
            for temporary in (str(path), path.name, folder):
                message = message.replace(temporary, shown)
            if message == str(exc):
                raise
            raise type(exc)(message) from None


def _shown_name(rel_path: str) -> str:
    """The item's last path part, printable and short, for a message."""
    name = "".join(c if c.isprintable() else "?" for c in PurePosixPath(rel_path).name)
    return (name if len(name) <= 80 else name[:77] + "...") or "the item"
