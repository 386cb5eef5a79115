"""Feeds (``kind = "feeds"``): fetching over HTTP with conditional requests
(``fetch``), parsing RSS, Atom and JSON Feed (``parse``), reading OPML
subscriptions (``opml``), the per-source archive of every entry ever seen
(``archive``), and the ``SourceKind`` (``kind``). ``ragline status`` lists the
archive without fetching anything."""

from rag_sources.kinds import KindInfo
from rag_sources.kinds.feeds import hits
from rag_sources.kinds.feeds.config import FeedsSourceConfig
from rag_sources.kinds.feeds.filters import FEEDS

KIND = KindInfo(
    FeedsSourceConfig,
    "rag_sources.kinds.feeds.kind:FeedsKind",
    filters=(FEEDS,),
    hit_details=(hits.FEED,),
    byline=hits.byline,
)
