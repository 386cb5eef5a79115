"""``kind = "calibre"``: being written (issue 12)."""

from __future__ import annotations

from collections.abc import Iterator

from rag_assets.formats.model import ItemError, ParsedDocument, ParseOptions
from rag_assets.sources.base import ItemStat, SourceKind
from rag_serving.config import CalibreSourceConfig
from rag_serving.errors import SourceUnavailableError


class CalibreKind(SourceKind):
    name = "calibre"
    config_type = CalibreSourceConfig

    def list_items(self) -> Iterator[ItemStat]:
        raise SourceUnavailableError(f"source {self.config.name!r}: kind calibre is not built yet")

    def content_hash(self, item: ItemStat) -> str:
        return item.fingerprint

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        raise ItemError("kind calibre is not built yet")

    def file_type(self, key: str) -> str | None:
        return None

    def parser_version(self, key: str) -> str:
        return "none"
