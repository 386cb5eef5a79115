"""The ``[[sources]]`` settings of a JSON-lines source (light: the CLI, search and
status import it to validate a config)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from rag_sources.config import FileSourceConfig
from rag_sources.listing import ListedItem


class JsonlSourceConfig(FileSourceConfig):
    """One ``.jsonl`` file; each line a document with an ``id`` and a ``text``."""

    kind: Literal["jsonl"]
    max_export_bytes: int = Field(default=512 * 1024 * 1024, ge=1024)  # a larger file is refused
    SOURCE_BLOCK: ClassVar[str] = """
[[sources]]
name = "{name}"
kind = "jsonl"
path = "{path}"           # a .jsonl file: {{"id": …, "title": …, "text": …, "tags": […]}} per line
"""

    def path_problems(self, where: Callable[[str], str]) -> list[str]:
        if self.path.is_file():
            return []
        return [f"{where('path')}: {self.path} is not a file; give the .jsonl export itself"]

    def listed_items(self, state_dir: Path | None) -> Iterator[ListedItem]:
        from ragline_jsonl.records import read_records

        for record in read_records(self.path, self.max_export_bytes):
            yield ListedItem(
                record.key, record.fingerprint, len(record.line), problem=record.problem
            )
