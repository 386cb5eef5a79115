"""The kind that reads a configured source, with its state folder: the kinds
themselves are in ``rag_sources/kinds/``, found through its registry."""

from __future__ import annotations

from pathlib import Path

from rag_serving.index.layout import IndexLayout
from rag_sources.config import FileSourceConfig
from rag_sources.kinds import kind_info
from rag_sources.kinds.base import DocumentView, ItemStat, SourceKind

__all__ = ["DocumentView", "ItemStat", "SourceKind", "source_kind"]


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
    return kind_info(config.kind).load()(config, state_dir)  # type: ignore[attr-defined]
