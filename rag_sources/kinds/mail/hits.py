"""How a message is shown in search results: its mail folder as a hit detail, and a
line of who sent it, when, and where it is filed."""

from __future__ import annotations

from rag_sources.hits import HitDetail, HitView, hit_date

FOLDER = HitDetail("folder", "folder", "Message: its mail folder.")


def byline(hit: HitView) -> str | None:
    """``source · sender · date · folder`` for a message (an attachment keeps the
    common line)."""
    if hit.file_type != "email":
        return None
    parts = (hit.author, hit_date(hit), hit.details.get("folder"))
    return " · ".join([hit.source, " · ".join(v for v in parts if v)])
