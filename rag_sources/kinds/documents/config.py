"""The ``[[sources]]`` settings of a documents source."""

from __future__ import annotations

from typing import ClassVar, Literal

from rag_sources.config import FileSourceConfig, OcrSettings


class DocumentsSourceConfig(FileSourceConfig, OcrSettings):
    """Any folder of documents: PDF, office files, HTML, EPUB, text, images."""

    kind: Literal["documents"]
    SOURCE_BLOCK: ClassVar[str] = """
[[sources]]
name = "{name}"
kind = "documents"
path = "{path}"
include = ["**/*"]
exclude = []
ocr = "auto"            # OCR pages and images without text (Tesseract); or "off"
ocr_languages = ["eng"]
"""
