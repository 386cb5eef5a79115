"""Source kinds: one module per kind, registered here by name.

Adding a kind: a config model in ``rag_serving/config.py`` (validated by the CLI and
search without importing Dagster), a module here with its ``SourceKind`` subclass,
and one line in ``KINDS``.
"""

from __future__ import annotations

from pathlib import Path

from rag_serving.index.layout import IndexLayout
from rag_sources.config import FileSourceConfig
from rag_sources.kinds.base import DocumentView, ItemStat, SourceKind
from rag_sources.kinds.calibre.kind import CalibreKind
from rag_sources.kinds.documents.kind import DocumentsKind
from rag_sources.kinds.feeds.kind import FeedsKind
from rag_sources.kinds.git.kind import GitKind
from rag_sources.kinds.mail.kind import MailKind
from rag_sources.kinds.markdown.kind import MarkdownKind

KINDS: dict[str, type[SourceKind]] = {
    MarkdownKind.name: MarkdownKind,
    DocumentsKind.name: DocumentsKind,
    GitKind.name: GitKind,
    MailKind.name: MailKind,
    FeedsKind.name: FeedsKind,
    CalibreKind.name: CalibreKind,
}

__all__ = ["KINDS", "DocumentView", "ItemStat", "SourceKind", "source_kind"]


def source_kind(
    config: FileSourceConfig, data_dir: Path | None = None, index_uri: str | None = None
) -> SourceKind:
    """The kind implementation for a configured source; ``data_dir`` (the index's)
    holds the kind's state folder (``IndexLayout.source_state_dir``), or, for state
    every host must share, the remote index at ``index_uri``."""
    state_dir = (
        None
        if data_dir is None
        else IndexLayout(data_dir, index_uri).source_state_dir(config.name, config.shared_state)
    )
    return KINDS[config.kind](config, state_dir)  # type: ignore[attr-defined]
