"""The ``SourceKind`` of a JSON-lines export (imported only to index)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rag_sources.formats.model import ItemError, ParsedDocument, ParseOptions
from rag_sources.kinds.base import ItemStat, SourceKind
from ragline_jsonl.config import JsonlSourceConfig
from ragline_jsonl.records import Record, read_records


class JsonlKind(SourceKind):
    name = "jsonl"
    config_type = JsonlSourceConfig

    def _records(self) -> dict[str, Record]:
        cached: dict[str, Record] | None = getattr(self, "_by_key", None)
        if cached is None:
            cached = {
                r.key: r for r in read_records(self.config.path, self.config.max_export_bytes)
            }
            self._by_key = cached
        return cached

    def list_items(self) -> Iterator[ItemStat]:
        for record in self._records().values():
            yield ItemStat(
                record.key, record.fingerprint, len(record.line), problem=record.problem,
                severity="error",
            )  # fmt: skip

    def content_hash(self, item: ItemStat) -> str:
        return item.fingerprint

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        record = self._records().get(key)
        if record is None or record.data is None:
            raise ItemError(f"{key}: no such record in {self.config.path.name}")
        data: dict[str, Any] = record.data
        tags = data.get("tags") or []
        return ParsedDocument(
            body=data["text"],
            title=str(data.get("title") or key),
            tags=tuple(str(t) for t in tags if isinstance(t, str)),
            metadata={"export": self.config.path.name, "channel": data.get("channel")},
        )

    def file_type(self, key: str) -> str | None:
        return "jsonl"

    def facets(self, key: str, metadata: dict[str, Any]) -> list[str]:
        channel = str(metadata.get("channel") or "")
        channel_facets = [f"channel:{' '.join(channel.split()).lower()}"] if channel else []
        return super().facets(key, metadata) + channel_facets

    def parser_version(self, key: str) -> str:
        return "jsonl/1"
