"""``kind = "documents"``: any folder of documents — PDF, DOCX, PPTX, XLSX, HTML,
EPUB, text, Markdown and images — each file routed to its parser by type."""

from __future__ import annotations

from rag_assets.sources.files import FileSourceKind
from rag_sources.kinds.documents.config import DocumentsSourceConfig


class DocumentsKind(FileSourceKind):
    name = "documents"
    config_type = DocumentsSourceConfig
