"""``kind = "mail"``: being written (issue 12)."""

from __future__ import annotations

from collections.abc import Iterator

from rag_assets.formats.model import ItemError, ParsedDocument, ParseOptions
from rag_assets.sources.base import ItemStat, SourceKind
from rag_serving.config import MailSourceConfig
from rag_serving.errors import SourceUnavailableError


class MailKind(SourceKind):
    name = "mail"
    config_type = MailSourceConfig

    def list_items(self) -> Iterator[ItemStat]:
        raise SourceUnavailableError(f"source {self.config.name!r}: kind mail is not built yet")

    def content_hash(self, item: ItemStat) -> str:
        return item.fingerprint

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        raise ItemError("kind mail is not built yet")

    def file_type(self, key: str) -> str | None:
        return None

    def parser_version(self, key: str) -> str:
        return "none"
