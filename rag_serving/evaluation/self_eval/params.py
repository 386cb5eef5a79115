"""What a self-evaluation set is made of: query types, modes, caps, file names."""

from __future__ import annotations

QUERY_TYPES = ("link", "heading", "fragment")
MODES = ("hybrid", "bm25", "vector")
K = 10
MAX_PER_TYPE = 300
# Links to one note: at most this many queries, so a hub note does not fill the set.
MAX_LINKS_PER_TARGET = 2
SET_FORMAT = 1
QUERIES_FILE = "self-queries.json"
HISTORY_FILE = "self-history.jsonl"
# Chunks asked of each search: enough for ten distinct documents or sections.
SEARCH_DEPTH = 50
