"""The ``[[sources]]`` settings of a markdown source."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import field_validator

from rag_sources.config import ATTACHMENT_SUFFIXES, FileSourceConfig, OcrSettings
from rag_sources.detect import Census

MARKDOWN_SUFFIXES = (".md", ".markdown")


class MarkdownSourceConfig(FileSourceConfig, OcrSettings):
    """A folder of Markdown notes, e.g. an Obsidian vault (with its attachments)."""

    kind: Literal["markdown"]
    DETECT_ORDER: ClassVar[int] = 40

    @classmethod
    def detect_marker(cls, folder: Path) -> str | None:
        return "found .obsidian/: an Obsidian vault" if (folder / ".obsidian").is_dir() else None

    @classmethod
    def claims_file(cls, name: str) -> bool:
        return name.lower().endswith(MARKDOWN_SUFFIXES)

    @classmethod
    def detect_census(cls, census: Census) -> str | None:
        notes, counted = census.claimed["markdown"], census.counted
        if counted and notes / counted >= 0.8:
            cut = census.cut_note()
            return f"{notes} of {counted} files are Markdown notes{f' ({cut})' if cut else ''}"
        return None

    SOURCE_BLOCK: ClassVar[str] = """
[[sources]]
name = "{name}"
kind = "markdown"
path = "{path}"
include = ["**/*.md"]
exclude = []
attachments = ["pdf"]   # also index these files of the vault (pdf, docx, pptx, png, ...)
"""
    include: list[str] = ["**/*.md", "**/*.markdown"]
    # Files besides the notes indexed with the document parsers (by type). Images are
    # off by default: OCR of every screenshot in a vault is rarely wanted.
    attachments: list[str] = ["pdf"]

    @field_validator("attachments")
    @classmethod
    def _known_attachments(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in ATTACHMENT_SUFFIXES:
                raise ValueError(
                    f"unknown attachment type {name!r}; supported: "
                    + ", ".join(ATTACHMENT_SUFFIXES)
                )
        return value

    def extra_suffixes(self) -> tuple[str, ...]:
        return tuple(s for name in self.attachments for s in ATTACHMENT_SUFFIXES[name])
