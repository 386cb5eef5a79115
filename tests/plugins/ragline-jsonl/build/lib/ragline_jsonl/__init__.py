"""A JSON-lines export as a ragline source: one JSON object per line, ``{"id": …,
"title": …, "text": …, "tags": […]}`` — what a Notion, Slack or bookmarks export
becomes after a line of jq."""

from rag_sources.kinds import KindInfo
from ragline_jsonl.config import JsonlSourceConfig

KIND = KindInfo(JsonlSourceConfig, "ragline_jsonl.kind:JsonlKind")
