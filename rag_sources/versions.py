"""Versions of what the readers produce."""

# Bump when chunk boundaries or the text given to the embedder change: the index
# records it, and a different value means the index must be rebuilt.
CHUNKER_VERSION = "md-headings-1"
