"""Source code: which language a file is, and its syntax-aware chunks (tree-sitter)."""

from rag_sources.code.chunker import CODE_CHUNKER_VERSION, chunk_code, code_symbols
from rag_sources.code.languages import CODE_LANGUAGES, language_for
from rag_sources.code.symbols import CodeSymbol

__all__ = [
    "CODE_CHUNKER_VERSION",
    "CODE_LANGUAGES",
    "CodeSymbol",
    "chunk_code",
    "code_symbols",
    "language_for",
]
