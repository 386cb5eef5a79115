"""The indexing chain: raw_files → parsed_documents → chunks → embeddings → fulltext_index."""

from rag_assets.assets.embeddings import embeddings
from rag_assets.assets.indexing import (
    chunks,
    fulltext_index,
    parsed_documents,
    raw_files,
)

INDEXING_ASSETS = [raw_files, parsed_documents, chunks, embeddings, fulltext_index]

__all__ = ["INDEXING_ASSETS"]
