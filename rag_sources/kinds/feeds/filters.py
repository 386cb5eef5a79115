"""The feeds kind's search filter: an entry's feed, by title."""

from rag_sources.filters import FacetFilter

FEEDS = FacetFilter(
    name="feeds",
    option="--feed",
    facets=("feed",),
    help="Only entries of this feed (repeatable).",
    description="Only entries of these feeds (by title).",
    unknown="no indexed feed is titled",
    singular="feed",
    indexed="feeds",
    aliases=("feed",),
)
