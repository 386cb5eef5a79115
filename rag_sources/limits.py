"""The caps that bound what one item may cost in memory and time (``[limits]``).

Every input ragline reads is hostile until proven otherwise: a 100 kB PNG can
declare 30,000 × 30,000 pixels, a 1 MB DOCX can unpack to gigabytes, an HTML page
can nest 200,000 elements, a mail header can be 40 MB. Each cap here turns such an
item into a recorded problem (or indexes it cut, with a warning) instead of taking
a run down. ``[limits]`` in ragline.toml sets them for every source;
``[sources.limits]`` overrides single keys for one source. docs/operations.md
lists them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MB = 2**20


class Limits(BaseModel):
    """Caps on one item (a file, a message, a feed, a book); see docs/operations.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Pixels of one image decoded or one page rendered for OCR (width × height):
    # 100 Mpx is a 10,000 × 10,000 scan, about 400 MB decoded.
    max_image_pixels: int = Field(default=100_000_000, ge=1_000_000)
    # Bytes one compressed item may unpack to: the members of a zip-based file
    # (DOCX, PPTX, XLSX, EPUB) together, or a compressed HTTP response.
    max_unpacked_bytes: int = Field(default=256 * MB, ge=MB)
    # Uncompressed ÷ compressed size of one zip member above 1 MB (a zip bomb packs
    # 1,000:1 and more; office XML rarely passes 20:1).
    max_unpack_ratio: int = Field(default=200, ge=10)
    # Nesting depth of elements (HTML, XML), values (JSON, YAML) and MIME parts:
    # deeper content is read as text or skipped, never recursed into.
    max_nesting_depth: int = Field(default=256, ge=16)
    # Parts of one message (attachments and alternatives); the rest are counted.
    max_mime_parts: int = Field(default=1_000, ge=10)
    # Bytes of one message's header block; a longer one makes the message a problem.
    max_header_bytes: int = Field(default=256 * 1024, ge=4096)
    # Characters of one heading kept as its anchor (the rest is body text).
    max_heading_chars: int = Field(default=300, ge=20)
    # Frames of one image file read (a TIFF of thousands of pages; the rest counted).
    max_image_frames: int = Field(default=500, ge=1)
    # Members of one zip-based file (zipfile builds an object per member).
    max_zip_members: int = Field(default=10_000, ge=100)
    # Bytes of one markup part a library parses whole into a tree (DOCX/PPTX XML, an
    # EPUB chapter, XLSX shared strings; worksheets are streamed).
    max_markup_part_bytes: int = Field(default=64 * MB, ge=MB)
    # Lines of one message read (the parser keeps an object per line).
    max_message_lines: int = Field(default=2_000_000, ge=10_000)
    # Rows and columns of one spreadsheet sheet indexed (the rest counted).
    max_sheet_rows: int = Field(default=2_000, ge=1)
    max_sheet_columns: int = Field(default=256, ge=1)
    # Characters of text kept per document (the rest dropped with a warning).
    max_document_chars: int = Field(default=20_000_000, ge=10_000)


DEFAULT_LIMITS = Limits()
