"""A JSON-lines export as a ragline source: one JSON object per line, ``{"id": …,
"title": …, "text": …, "tags": […], "channel": …}`` — what a Notion, Slack or bookmarks
export becomes after a line of jq. Its records' channel is a search filter
(``--channel``) and, in MCP ``neighbors``, a list of the channel's other records."""

from rag_sources.kinds import KindInfo
from ragline_jsonl.channels import CHANNEL, SAME_CHANNEL
from ragline_jsonl.config import JsonlSourceConfig

KIND = KindInfo(
    JsonlSourceConfig,
    "ragline_jsonl.kind:JsonlKind",
    relations=(SAME_CHANNEL,),
    filters=(CHANNEL,),
)
