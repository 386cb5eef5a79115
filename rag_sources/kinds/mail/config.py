"""The ``[[sources]]`` settings of a mail source."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from rag_sources.config import FileSourceConfig
from rag_sources.listing import ListedItem


class MailSourceConfig(FileSourceConfig):
    """Mail in the standard formats: mbox files (Thunderbird profiles), Maildir
    folders (nested, ``cur/`` alone is enough), ``.eml`` and Apple Mail ``.emlx``
    files. ``path`` is a folder or one mbox file."""

    kind: Literal["mail"]
    SOURCE_BLOCK: ClassVar[str] = """
[[sources]]
name = "{name}"
kind = "mail"
path = "{path}"           # a folder of mbox files, Maildirs, .eml or .emlx files, or one mbox
attachments = true        # index PDF, office and text attachments, linked to their message
"""
    # Only mail files are read (mbox, Maildir messages, .eml, .emlx); a desktop
    # client's other files beside them (Thunderbird's .msf summaries) are passed over.
    ignore_dirs: list[str] = [".git", ".trash", "tmp"]
    attachments: bool = True  # index PDF, office and text attachments as child documents
    max_attachment_bytes: int = Field(default=25_000_000, ge=1_000)  # larger ones are skipped
    max_message_bytes: int = Field(default=50_000_000, ge=1_000)  # larger messages are skipped

    def listed_items(self, state_dir: Path | None) -> Iterator[ListedItem]:
        from rag_sources.kinds.mail.listing import list_mail_items

        return list_mail_items(self, state_dir)

    def path_problems(self, where: Callable[[str], str]) -> list[str]:
        if self.path.is_file():
            return []  # one mbox file
        return super().path_problems(where)
