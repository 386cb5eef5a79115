"""Listing the sources that are not plain folders (mail, feeds, Calibre) for
``ragline status``, without the indexing side: each kind's reader lists its items
here as ``ListedItem`` records, and its ``SourceKind`` turns them into ``ItemStat``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rag_sources.config import FileSourceConfig
from rag_sources.listing import ListedItem


def list_source_items(config: FileSourceConfig, state_dir: Path | None) -> Iterator[ListedItem]:
    """The items of a mail, feeds or Calibre source, as the next scan will list them
    (a feeds source: the entries fetched so far; nothing is fetched here).
    ``state_dir``: the kind's state folder, or None when the index has none yet."""
    kind = config.kind  # type: ignore[attr-defined]
    if kind == "mail":
        from rag_sources.kinds.mail.listing import list_mail_items

        yield from list_mail_items(config, state_dir)  # type: ignore[arg-type]
    elif kind == "feeds":
        from rag_sources.kinds.feeds.archive import list_archived_entries

        yield from list_archived_entries(config, state_dir)  # type: ignore[arg-type]
    elif kind == "calibre":
        from rag_sources.kinds.calibre.library import list_books

        yield from list_books(config)  # type: ignore[arg-type]
    else:
        raise ValueError(f"kind {kind!r} is listed by the folder walker or git, not here")


LISTED_KINDS = ("mail", "feeds", "calibre")
