"""``kind = "feeds"``: being written (issue 12)."""

from __future__ import annotations

from collections.abc import Iterator

from rag_assets.formats.model import ItemError, ParsedDocument, ParseOptions
from rag_assets.sources.base import ItemStat, SourceKind
from rag_serving.config import FeedsSourceConfig
from rag_serving.errors import SourceUnavailableError


class FeedsKind(SourceKind):
    name = "feeds"
    config_type = FeedsSourceConfig

    def list_items(self) -> Iterator[ItemStat]:
        raise SourceUnavailableError(f"source {self.config.name!r}: kind feeds is not built yet")

    def content_hash(self, item: ItemStat) -> str:
        return item.fingerprint

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        raise ItemError("kind feeds is not built yet")

    def file_type(self, key: str) -> str | None:
        return None

    def parser_version(self, key: str) -> str:
        return "none"
