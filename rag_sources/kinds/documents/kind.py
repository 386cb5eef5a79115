"""``kind = "documents"``: any folder of documents — PDF, DOCX, PPTX, XLSX, HTML,
EPUB, text, Markdown and images — each file routed to its parser by type."""

from __future__ import annotations

from rag_sources.kinds.documents.config import DocumentsSourceConfig
from rag_sources.kinds.files import FileSourceKind


class DocumentsKind(FileSourceKind):
    name = "documents"
    config_type = DocumentsSourceConfig
