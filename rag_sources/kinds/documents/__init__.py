"""A folder of documents: PDF, office files, HTML, EPUB, text, images."""

from rag_sources.kinds import KindInfo
from rag_sources.kinds.documents.config import DocumentsSourceConfig

KIND = KindInfo(DocumentsSourceConfig, "rag_sources.kinds.documents.kind:DocumentsKind")
