"""How a feed entry is shown in search results: its feed's title as a hit detail, and
a line of who wrote it, when, and in which feed."""

from __future__ import annotations

from rag_sources.hits import HitDetail, HitView, hit_date

FEED = HitDetail("feed", "feed_name", "Feed entry: its feed's title.")


def byline(hit: HitView) -> str | None:
    """``source · author · date · feed`` for an entry."""
    if hit.file_type != "entry":
        return None
    parts = (hit.author, hit_date(hit), hit.details.get("feed"))
    return " · ".join([hit.source, " · ".join(v for v in parts if v)])
