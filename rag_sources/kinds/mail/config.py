"""The ``[[sources]]`` settings of a mail source."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from rag_sources.config import FileSourceConfig
from rag_sources.detect import Census, FolderUnit
from rag_sources.listing import ListedItem


class MailSourceConfig(FileSourceConfig):
    """Mail in the standard formats: mbox files (Thunderbird profiles), Maildir
    folders (nested, ``cur/`` alone is enough), ``.eml`` and Apple Mail ``.emlx``
    files. ``path`` is a folder or one mbox file."""

    kind: Literal["mail"]
    DETECT_ORDER: ClassVar[int] = 30

    @classmethod
    def detect_marker(cls, folder: Path) -> str | None:
        from rag_sources.kinds.mail.detect import top_maildir

        return top_maildir(folder)

    @classmethod
    def claims_file(cls, name: str) -> bool:
        from rag_sources.kinds.mail.detect import is_mail_file

        return is_mail_file(name)

    @classmethod
    def claim_folder(cls, folder: Path, subfolders: set[str], budget: int) -> FolderUnit | None:
        from rag_sources.kinds.mail.detect import maildir_unit

        return maildir_unit(folder, subfolders, budget)

    @classmethod
    def enters(cls, folder: Path) -> bool:
        return (folder / "cur").is_dir()  # a Maildir++ folder (".Lists.linux")

    @classmethod
    def detect_census(cls, census: Census) -> str | None:
        from rag_sources.kinds.mail.detect import mail_census

        return mail_census(census)

    @classmethod
    def detect_file(cls, path: Path, head: bytes) -> str | None:
        if head.startswith(b"From ") or path.suffix.lower() in (".mbox", ".mbx"):
            return "an mbox file"
        return None

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
