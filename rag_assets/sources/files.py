"""What every file-based kind shares: the walker, hashing, and routing files to the
format parsers by type."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

from rag_assets.formats import router
from rag_assets.formats.model import ItemSkipped, ParsedDocument, ParseOptions
from rag_assets.sources.base import ItemStat, SourceKind
from rag_serving.scanning import iter_source_files

_HASH_BLOCK = 1 << 20


class FileSourceKind(SourceKind):
    """A folder of files: items are files, keys their relative POSIX paths."""

    @property
    def root(self) -> Path:
        return Path(self.config.path)

    def list_items(self) -> Iterator[ItemStat]:
        for stat in iter_source_files(self.config):
            yield ItemStat(stat.path, f"{stat.size}:{stat.mtime_ns}", stat.size, stat.mtime_ns)

    def content_hash(self, item: ItemStat) -> str:
        digest = hashlib.sha256()
        with open(self.root / item.key, "rb") as handle:
            while block := handle.read(_HASH_BLOCK):
                digest.update(block)
        return digest.hexdigest()

    def file_type(self, key: str) -> str | None:
        return router.file_type(key)

    def parser_version(self, key: str) -> str:
        file_type = self.file_type(key)
        return router.PARSER_VERSIONS.get(file_type or "", "none")

    def parse_options(self, allow_deferred_work: bool) -> ParseOptions:
        config = self.config
        return ParseOptions(
            ocr=getattr(config, "ocr", "auto"),
            ocr_languages=tuple(getattr(config, "ocr_languages", ("eng",))),
            allow_deferred_work=allow_deferred_work,
        )

    def parse(self, key: str, options: ParseOptions) -> ParsedDocument:
        file_type = self.file_type(key)
        if file_type is None:
            raise ItemSkipped("no parser for this type of file; exclude it with `exclude`")
        return router.parse_file(self.root / key, key, file_type, options)
