"""The bottom layer: what a source is and how it is read — the kinds (one folder
each, found through one registry), the format parsers and the code chunker they
share, the walker with its rules about what may be read, and the limits every
reader keeps. It imports neither Dagster nor the index: ``rag_serving`` (index,
search, status, MCP) and ``rag_assets`` (the Dagster definitions) build on it."""
