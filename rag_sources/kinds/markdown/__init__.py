"""Markdown notes, e.g. an Obsidian vault, with their attachments."""

from rag_sources.kinds import KindInfo
from rag_sources.kinds.markdown.config import MarkdownSourceConfig

KIND = KindInfo(MarkdownSourceConfig, "rag_sources.kinds.markdown.kind:MarkdownKind")
