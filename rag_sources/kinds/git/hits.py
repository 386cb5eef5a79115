"""How a commit is shown in search results: ``source@sha · date · author`` (a file of
the repository keeps the common line)."""

from __future__ import annotations

from rag_sources.hits import HitView, hit_date


def byline(hit: HitView) -> str | None:
    if hit.file_type != "commit":
        return None
    sha = hit.path.rsplit("/", 1)[-1][:10]
    return f"{hit.source}@{sha} · {hit_date(hit)} · {hit.author or '?'}"
