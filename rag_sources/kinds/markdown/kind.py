"""``kind = "markdown"``: a folder of Markdown notes (an Obsidian vault), plus the
attachments the source names (PDFs by default), parsed by the document parsers."""

from __future__ import annotations

from rag_sources.kinds.files import FileSourceKind
from rag_sources.kinds.markdown.config import MarkdownSourceConfig


class MarkdownKind(FileSourceKind):
    name = "markdown"
    config_type = MarkdownSourceConfig
