"""File type by extension, and the parser for each type.

The file-based source kinds route every file through here; the stages never look
at a file type. ``PARSER_VERSIONS`` records each parser's version: bump one and only
the files of that type are parsed again (parsed output is cached by content hash and
parser version).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from rag_assets.formats.model import ParsedDocument, ParseOptions

# extension (lowercase, with the dot) -> file type
FILE_TYPES: dict[str, str] = {
    ".md": "md",
    ".markdown": "md",
}

# file type -> parser version ("<type>/<n>"); part of the parse cache key
PARSER_VERSIONS: dict[str, str] = {
    "md": "md/2",  # 2: links to documents (paper.pdf) kept
}

# names people use for a type -> the type (for `--type`)
TYPE_ALIASES: dict[str, str] = {"markdown": "md"}

Parser = Callable[[Path, str, ParseOptions], ParsedDocument]


def file_type(path: str) -> str | None:
    """The file type of ``path`` by its extension (None when no parser handles it)."""
    return FILE_TYPES.get(PurePosixPath(path).suffix.lower())


def _parse_markdown(full_path: Path, rel_path: str, options: ParseOptions) -> ParsedDocument:
    from rag_assets.formats.markdown import parse_markdown_document

    return parse_markdown_document(full_path.read_bytes(), rel_path)


PARSERS: dict[str, Parser] = {
    "md": _parse_markdown,
}


def parse_file(
    full_path: Path, rel_path: str, type_name: str, options: ParseOptions
) -> ParsedDocument:
    """Parse the file at ``full_path`` (shown as ``rel_path``) as ``type_name``.

    Raises ``ItemSkipped`` / ``ItemError`` with a one-line reason for files that
    cannot be indexed; any other exception is a parser bug.
    """
    return PARSERS[type_name](full_path, rel_path, options)
