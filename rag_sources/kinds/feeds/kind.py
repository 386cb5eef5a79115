"""``kind = "feeds"``: RSS, Atom and JSON Feed entries, one document each.

Listing fetches the feeds that are due (``rag_sources.kinds.feeds.poll``: conditional GET,
timeouts, a size cap, a named user agent) into the source's archive, then lists
every archived entry — a feed is a window, not the archive, so entries that fall
out of it stay indexed. Keys are ``<feed id>/<entry id>`` (a slug of the feed URL;
a hash of the guid, else the link, else title and date); an entry's fingerprint is
a hash of its content fields, so an updated entry is parsed again. A feed that
cannot be fetched or parsed is a problem ``<feed id>/`` that keeps its entries.

The sensor's change signal needs no network: it changes when the feed list changes
or a feed's poll period begins (periods are aligned on the clock).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from rag_sources.formats.html import html_text
from rag_sources.formats.model import BodyBuilder, ItemError, ParsedDocument, ParseOptions
from rag_sources.formats.text import cap_text
from rag_sources.kinds.base import ItemStat, SourceKind
from rag_sources.kinds.feeds import archive
from rag_sources.kinds.feeds.archive import FeedSpec, FeedState
from rag_sources.kinds.feeds.config import FeedsSourceConfig
from rag_sources.kinds.feeds.fetch import feed_label
from rag_sources.kinds.feeds.parse import Entry
from rag_sources.kinds.feeds.poll import RefreshReport, refresh_feeds

ENTRY_PARSER = "entry/1"
TITLE_CHARS = 120  # an untitled entry is named after the start of its text


class FeedsKind(SourceKind):
    name = "feeds"
    config_type = FeedsSourceConfig

    last_refresh: RefreshReport | None = None

    @property
    def location(self) -> str:
        """The feeds as messages name them: URLs, and local files by name only (the
        messages reach MCP clients, which must not learn the server's paths)."""
        config: FeedsSourceConfig = self.config  # type: ignore[assignment]
        parts = [feed_label(f.url) for f in config.feeds()]
        if config.opml is not None:
            parts.append(config.opml.name)
        return ", ".join(parts)

    @cached_property
    def specs(self) -> dict[str, FeedSpec]:
        """The configured feeds by feed id."""
        return {s.feed_id: s for s in archive.configured_feeds(self.config)}  # type: ignore[arg-type]

    # ---- list ----------------------------------------------------------------

    def list_items(self) -> Iterator[ItemStat]:
        config: FeedsSourceConfig = self.config  # type: ignore[assignment]
        self.last_refresh = refresh_feeds(config, self.state_dir, force=self.on_demand)
        self._states.clear()
        for item in archive.list_archived_entries(config, self.state_dir):
            yield ItemStat(
                item.key, item.fingerprint, item.size, None, item.problem, item.severity,
                item.unavailable,
            )  # fmt: skip

    def change_signal(self) -> str:
        """The feed list and each feed's current poll period: no network."""
        return archive.schedule_signal(self.config)  # type: ignore[arg-type]

    # ---- load ----------------------------------------------------------------

    def content_hash(self, item: ItemStat) -> str:
        return item.fingerprint  # a hash of the entry's content fields

    def file_type(self, key: str) -> str | None:
        return "entry"

    def parser_version(self, key: str) -> str:
        return ENTRY_PARSER

    def parse(
        self, key: str, options: ParseOptions, content_hash: str | None = None
    ) -> ParsedDocument:
        fid, _, eid = key.partition("/")
        spec = self.specs.get(fid)
        if spec is None:
            raise ItemError(f"feed {fid} is no longer configured in this source")
        state = self._state(spec)
        entry = state.entry(eid) if state is not None else None
        if state is None or entry is None:
            raise ItemError("the entry is not in the feed archive; run the source again")
        return entry_document(spec, state, eid, entry, options)

    @cached_property
    def _states(self) -> dict[str, tuple[int, FeedState]]:
        return {}

    def _state(self, spec: FeedSpec) -> FeedState | None:
        """A feed's archived state, read once per change of its file."""
        path = archive.archive_path(self.state_dir, spec.feed_id)
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            return None
        cached = self._states.get(spec.feed_id)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        state = archive.load_state(self.state_dir, spec)
        if state is not None:
            self._states[spec.feed_id] = (stamp, state)
        return state

    def facets(self, key: str, metadata: dict[str, Any]) -> list[str]:
        facets = super().facets(key, metadata)
        feed = str(metadata.get("feed_title") or "")
        if feed:
            facets += [f"feed:{_fold(feed)}", f"feed_name:{' '.join(feed.split())}"]
        name = str(metadata.get("author") or "")
        email = str(metadata.get("author_email") or "").lower()
        facets += [f"author:{v}" for v in dict.fromkeys((_fold(name), email)) if v]
        if name or email:
            facets.append(f"author_name:{' '.join((name or email).split())}")
        return facets


def _fold(text: str) -> str:
    return " ".join(text.split()).lower()


def entry_text(
    text: str | None,
    content_type: str,
    max_depth: int | None = None,
    warnings: list[str] | None = None,
) -> str:
    """An entry's content as text: HTML through the page extractor (everything
    kept: an entry has no navigation; elements nested deeper than ``max_depth`` read
    as plain text, saying so in ``warnings``), plain text as it is."""
    if not text or not text.strip():
        return ""
    if content_type == "html":
        extracted = html_text(text, boilerplate=False, max_depth=max_depth)
        if warnings is not None:
            warnings.extend(extracted.warnings)
        return extracted.text
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").split("\n")).strip()


def entry_document(
    spec: FeedSpec, state: FeedState, eid: str, entry: Entry, options: ParseOptions
) -> ParsedDocument:
    """One entry as a document: a header (feed, author, date, link) and its text."""
    warnings: list[str] = []
    feed_title = archive.display_title(spec, state)
    depth = options.limits.max_nesting_depth
    body = entry_text(entry.content, entry.content_type, depth, warnings) or entry_text(
        entry.summary, entry.summary_type, depth, warnings
    )
    body = cap_text(body, options, warnings)
    title = entry.title or _title_from(body) or entry.link or "(untitled entry)"
    record = state.entries[eid]
    published = _date(entry.published)
    updated = _date(entry.updated)
    first_seen = _date(record.get("first_seen"))
    author = entry.author or entry.author_email
    header = [title, "", f"Feed: {feed_title}"]
    if author:
        header.append(
            f"Author: {entry.author} <{entry.author_email}>"
            if entry.author and entry.author_email
            else f"Author: {author}"
        )
    if published:
        header.append(f"Published: {published.isoformat(timespec='minutes')}")
    if updated and updated != published:
        header.append(f"Updated: {updated.isoformat(timespec='minutes')}")
    if entry.link:
        header.append(f"Link: {entry.link}")
    builder = BodyBuilder()
    builder.add("entry", "Entry", "\n".join(header), (title,))
    builder.add("content", "Content", body, (title,))
    if state.warning and state.warning_entry == eid:
        warnings.append(state.warning)
    metadata = {
        "feed_title": feed_title,
        "feed_url": state.feed_url or spec.url,
        "link": entry.link,
        "guid": entry.guid,
        "author": author,
        "author_email": entry.author_email,
        "published": published.isoformat() if published else None,
        "updated": updated.isoformat() if updated else None,
    }
    if state.feed_url:  # the source names a web page; this is the feed it links to
        metadata["feed_page"] = spec.url
    if spec.categories:
        metadata["categories"] = list(spec.categories)
    # An entry without dates is dated by when it was first fetched, so that date
    # filters place it (metadata keeps published/updated None).
    created = published or updated or first_seen
    return builder.document(
        title=title,
        metadata=metadata,
        created=created,
        updated=updated or created,
        warnings=tuple(warnings),
    )


def _title_from(body: str) -> str | None:
    line = next((ln.strip("# ").strip() for ln in body.splitlines() if ln.strip()), "")
    if not line:
        return None
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
