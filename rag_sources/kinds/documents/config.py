"""The ``[[sources]]`` settings of a documents source."""

from __future__ import annotations

from typing import ClassVar, Literal

from rag_sources.config import FileSourceConfig, OcrSettings
from rag_sources.detect import Census


class DocumentsSourceConfig(FileSourceConfig, OcrSettings):
    """Any folder of documents: PDF, office files, HTML, EPUB, text, images."""

    kind: Literal["documents"]
    DETECT_ORDER: ClassVar[int] = 90  # the fallback: any folder is one of documents

    @classmethod
    def detect_census(cls, census: Census) -> str:
        cut = census.cut_note()
        also = f"; {cut}" if cut else ""
        counted = census.counted
        if counted:
            notes = census.claimed["markdown"]
            why = (
                f"a folder of documents ({counted - notes} of {counted} files are not "
                f"Markdown; Markdown files in it are indexed too{also})"
            )
        elif census.files:
            why = f"a folder of documents (none of its {census.files} files has a known type{also})"
        else:
            why = f"an empty folder, taken as a folder of documents{f' ({cut})' if cut else ''}"
        return "; ".join([why, *census.notes])

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
