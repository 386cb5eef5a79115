"""Clipping a page or a PDF into the configured clippings folder (``[clip]``): where
it goes, the download and extraction (``rag_sources.clipping``), the same URL clipped
twice found, auto-tags, the note written. Indexing it is the caller's: ``ragline
clip`` runs the source's partition and waits, the MCP ``clip`` tool goes through the
server's reindexer."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_serving.config import RaglineConfig
from rag_serving.llm.tags import AutoTags, TagSubject, known_tags, suggest_tags
from rag_serving.notes_inbox import holds_notes
from rag_sources.clipping.archive import find_clip, save
from rag_sources.clipping.download import ClipError, download
from rag_sources.clipping.extract import extract
from rag_sources.config import FileSourceConfig
from rag_sources.errors import ConfigError, IndexNotBuiltError
from rag_sources.naming import clean_tags
from rag_sources.scanning import may_change_source, source_root

if TYPE_CHECKING:
    from rag_serving.search import SearchEngine

__all__ = ["ClipError", "ClipTarget", "Clipped", "clip", "clip_target"]

NOTE_PROBE = "note.md"
PDF_PROBE = "clip.pdf"


@dataclass(frozen=True)
class ClipTarget:
    """The clippings folder: a folder inside a source whose kind indexes notes."""

    source: FileSourceConfig
    root: Path  # the source's real folder
    folder: str  # inside it, relative


@dataclass
class Clipped:
    """One clip's outcome (before it is indexed)."""

    source: str
    path: str  # the note, relative to the source's root
    file: Path  # the note on disk
    url: str
    canonical_url: str
    title: str
    duplicate: bool = False  # the URL was clipped before: ``path`` is that first copy
    attachment: str | None = None  # the PDF beside the note
    tags: list[str] = field(default_factory=list)
    tagging: str | None = None  # what auto-tagging did, or why it was skipped

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "path": self.path,
            "file": str(self.file),
            "attachment": self.attachment,
            "url": self.url,
            "canonical_url": self.canonical_url,
            "title": self.title,
            "duplicate": self.duplicate,
            "tags": self.tags,
            "tagging": self.tagging,
        }


def clip_target(config: RaglineConfig, source_name: str | None = None) -> ClipTarget:
    """Where clips go: ``source_name`` or ``[clip] source``, and ``[clip] folder``;
    a ``ConfigError`` naming the setting when none is set or it cannot hold notes."""
    name = source_name or config.clip.source
    where = "--source" if source_name else "[clip] source"
    if not name:
        raise ConfigError(
            'no clippings source: set [clip] source = "<name>" in the config (a source of '
            "Markdown notes, e.g. your vault) or pass --source"
        )
    try:
        source = config.source(name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}; name a configured source of Markdown notes") from None
    folder = config.clip.folder
    if not holds_notes(source):
        raise ConfigError(
            f"{where} = {name!r}: that source does not hold Markdown notes; name a source "
            "of notes (a vault) for clippings"
        )
    root = source_root(source)
    if not may_change_source(source, root, root / folder / "2000-01" / NOTE_PROBE):
        raise ConfigError(
            f"{where} = {name!r}: the source does not index notes in its folder {folder!r} "
            "(its include, exclude or ignore_dirs leave them out); change [clip] folder or "
            "those settings"
        )
    return ClipTarget(source, root, folder)


def clip(
    config: RaglineConfig,
    target: str,
    *,
    tags: list[str] | None = None,
    source_name: str | None = None,
    reach: int | None = None,
    allow_local: bool = True,
    engine: Callable[[], SearchEngine] | None = None,
    visible: Callable[[str], bool] | None = None,
    now: datetime | None = None,
) -> Clipped:
    """Clip ``target`` (an http(s) URL, or a file when ``allow_local``) into the
    clippings folder; a URL clipped before is not fetched again when it was given as
    is, and not written again when its canonical URL matches (``duplicate``).
    ``engine``: the index, for the tags auto-tagging may prefer (of the sources
    ``visible`` accepts). Raises ``ClipError`` / ``ConfigError`` in one line."""
    where = clip_target(config, source_name)
    given = clean_tags(tags or [])
    folder = _inside(where, where.folder)
    earlier = find_clip(folder, [target]) if "://" in target else None
    if earlier is not None:
        return _duplicate(where, earlier, target)
    settings = config.clip
    got = download(
        target,
        timeout=settings.timeout_s,
        max_bytes=settings.max_bytes,
        reach=reach,
        allow_local=allow_local,
    )
    page = extract(got, max_depth=where.source.limits.max_nesting_depth)
    earlier = find_clip(folder, [got.url, got.final_url, page.canonical_url])
    if earlier is not None:
        return _duplicate(where, earlier, got.url, page.canonical_url, page.title)
    if got.kind == "pdf" and not may_change_source(
        where.source, where.root, folder / "2000-01" / PDF_PROBE
    ):
        raise ClipError(
            f"{got.url}: a PDF, and the source {where.source.name!r} does not index PDFs in "
            f'{where.folder!r}; add "pdf" to its attachments to clip PDFs'
        )
    tagging: AutoTags | None = None
    if settings.auto_tags:
        details = [f"Author: {page.author or 'unknown'}", f"URL: {page.canonical_url}"]
        subject = TagSubject(page.title, page.body, details)
        tagging = suggest_tags(config, subject, _known_tags(engine, visible))
    merged = list(dict.fromkeys([*given, *(tagging.tags if tagging else [])]))
    fetched = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    saved = save(
        where.root,
        where.folder,
        page,
        got.url,
        fetched,
        merged,
        pdf=got.content if got.kind == "pdf" else None,
    )
    return Clipped(
        source=where.source.name,
        path=saved.note,
        file=where.root / saved.note,
        url=got.url,
        canonical_url=page.canonical_url,
        title=page.title,
        attachment=saved.attachment,
        tags=merged,
        tagging=tagging.note if tagging else None,
    )


def _inside(where: ClipTarget, folder: str) -> Path:
    """The clippings folder, checked to lie inside the source once links are resolved
    (a link there must not lead the notes elsewhere)."""
    path = where.root / folder
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(where.root):
        raise ConfigError(
            f"[clip] folder = {folder!r} leads outside the source {where.source.name!r} (a "
            "symbolic link); choose a folder inside it"
        )
    return path


def _known_tags(
    engine: Callable[[], SearchEngine] | None, visible: Callable[[str], bool] | None
) -> list[str]:
    if engine is None:
        return []
    try:
        return known_tags(engine().store, visible)
    except IndexNotBuiltError:
        return []


def _duplicate(
    where: ClipTarget, earlier: Path, url: str, canonical: str | None = None, title: str = ""
) -> Clipped:
    path = earlier.relative_to(where.root).as_posix()
    return Clipped(
        source=where.source.name,
        path=path,
        file=earlier,
        url=url,
        canonical_url=canonical or url,
        title=title,
        duplicate=True,
    )
