"""The ``[[sources]]`` settings of a documents source."""

from __future__ import annotations

from typing import Literal

from rag_sources.config import FileSourceConfig, OcrSettings


class DocumentsSourceConfig(FileSourceConfig, OcrSettings):
    """Any folder of documents: PDF, office files, HTML, EPUB, text, images."""

    kind: Literal["documents"]
