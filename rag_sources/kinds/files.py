"""What every file-based kind shares: the walker, hashing, and routing files to the
format parsers by type."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

from rag_sources.formats import router
from rag_sources.formats.model import ItemSkipped, ParsedDocument, ParseOptions, options_for
from rag_sources.kinds.base import ChangedItems, ItemStat, SourceKind
from rag_sources.scanning import (
    FileStat,
    OutsideSourceError,
    iter_source_files,
    list_source_paths,
    may_change_source,
    open_source_file,
    pinned_source_file,
    source_root,
)

_HASH_BLOCK = 1 << 20


class FileSourceKind(SourceKind):
    """A folder of files: items are files, keys their relative POSIX paths."""

    @property
    def root(self) -> Path:
        return Path(self.config.path)

    @cached_property
    def real_root(self) -> Path:
        """The source folder with every symbolic link resolved: what "inside the
        source" means (raises ``SourceUnavailableError`` when it cannot be reached)."""
        return source_root(self.config)

    def list_items(self) -> Iterator[ItemStat]:
        for stat in iter_source_files(self.config):
            yield _item(stat)

    def list_changed(self, paths: list[Path]) -> ChangedItems | None:
        root = Path(self.config.path).expanduser().absolute()
        listing = list_source_paths(self.config, root, paths)
        if listing is None:
            return None
        return ChangedItems([_item(stat) for stat in listing.stats], tuple(listing.covered))

    def watch_roots(self) -> list[Path]:
        return [self.root]

    def watches(self, path: Path) -> bool:
        return may_change_source(self.config, self.root, path)

    def content_hash(self, item: ItemStat) -> str:
        return source_file_sha256(self.real_root, item.key)

    def file_type(self, key: str) -> str | None:
        return router.file_type(key)

    def parser_version(self, key: str) -> str:
        file_type = self.file_type(key)
        return router.PARSER_VERSIONS.get(file_type or "", "none")

    def parse_options(self, allow_deferred_work: bool) -> ParseOptions:
        config = self.config
        return options_for(
            config.limits,
            ocr=getattr(config, "ocr", "auto"),
            ocr_languages=tuple(getattr(config, "ocr_languages", ("eng",))),
            allow_deferred_work=allow_deferred_work,
        )

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        file_type = self.file_type(key)
        if file_type is None:
            raise ItemSkipped("no parser for this type of file; exclude it with `exclude`")
        try:
            with pinned_source_file(self.real_root, key) as path:
                return router.parse_file(path, key, file_type, options)
        except OutsideSourceError as exc:
            raise ItemSkipped(exc.strerror or str(exc)) from None


def _item(stat: FileStat) -> ItemStat:
    if stat.problem is not None:
        return ItemStat(
            stat.path, f"{stat.severity}:{stat.problem}", problem=stat.problem,
            severity=stat.severity, unavailable=stat.unavailable,
        )  # fmt: skip
    return ItemStat(stat.path, f"{stat.size}:{stat.mtime_ns}", stat.size, stat.mtime_ns)


def source_file_sha256(real_root: Path, key: str) -> str:
    """The SHA-256 of a source's file, read through the walker's checks: a file
    replaced by a link since it was listed is refused (``ItemSkipped``), never
    followed outside the source."""
    try:
        fd = open_source_file(real_root, key)
    except OutsideSourceError as exc:
        raise ItemSkipped(exc.strerror or str(exc)) from None
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()
