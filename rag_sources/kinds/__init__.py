"""The source kinds, one folder each."""

from __future__ import annotations

import typing

from rag_sources.config import FileSourceConfig
from rag_sources.kinds.calibre.config import CalibreSourceConfig
from rag_sources.kinds.documents.config import DocumentsSourceConfig
from rag_sources.kinds.feeds.config import FeedsSourceConfig
from rag_sources.kinds.git.config import GitSourceConfig
from rag_sources.kinds.mail.config import MailSourceConfig
from rag_sources.kinds.markdown.config import MarkdownSourceConfig

# The config model of each built-in kind, in the order `ragline init` offers them.
BUILT_IN_CONFIGS = (
    MarkdownSourceConfig,
    DocumentsSourceConfig,
    GitSourceConfig,
    MailSourceConfig,
    FeedsSourceConfig,
    CalibreSourceConfig,
)


def kind_name(model: type[FileSourceConfig]) -> str:
    """The ``kind = "…"`` value a config model stands for."""
    return typing.get_args(model.model_fields["kind"].annotation)[0]


BUILT_IN_KINDS = tuple(kind_name(model) for model in BUILT_IN_CONFIGS)
