"""The ``[[sources]]`` settings of a calibre source."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import field_validator

from rag_sources.config import FileSourceConfig, OcrMode, OcrSettings
from rag_sources.listing import ListedItem


class CalibreSourceConfig(FileSourceConfig, OcrSettings):
    """A Calibre library (the folder holding ``metadata.db``), read-only: each book's
    metadata and the text of one of its formats."""

    kind: Literal["calibre"]
    DETECT_ORDER: ClassVar[int] = 20

    @classmethod
    def detect_marker(cls, folder: Path) -> str | None:
        return (
            "found metadata.db: a Calibre library" if (folder / "metadata.db").is_file() else None
        )

    SOURCE_BLOCK: ClassVar[str] = """
[[sources]]
name = "{name}"
kind = "calibre"
path = "{path}"           # the folder that holds metadata.db
formats = ["epub", "pdf", "docx", "html", "txt", "md"]   # the first the book has is read
"""
    ocr: OcrMode = "off"  # scanned PDF books take hours of OCR; turn on when wanted
    # Which of a book's formats is read, first found first.
    # (MOBI, AZW3, RTF, HTMLZ have no parser: a book with only those is skipped, saying so)
    formats: list[str] = ["epub", "pdf", "docx", "html", "txt", "md"]

    def listed_items(self, state_dir: Path | None) -> Iterator[ListedItem]:
        """One item per book of ``metadata.db``."""
        from rag_sources.kinds.calibre.library import list_books

        return list_books(self)

    def folder_problem(self, folder: Path) -> str | None:
        if (folder / "metadata.db").is_file():
            return None
        return (
            "is not a Calibre library (no metadata.db in it); give the folder Calibre shows "
            "under Preferences → Library location"
        )

    ignore_dirs: list[str] = [".caltrash", ".calnotes"]

    @field_validator("formats")
    @classmethod
    def _formats(cls, value: list[str]) -> list[str]:
        cleaned = [v.strip().lower().lstrip(".") for v in value]
        if not cleaned or not all(cleaned):
            raise ValueError("give at least one book format, e.g. ['epub', 'pdf']")
        return cleaned
