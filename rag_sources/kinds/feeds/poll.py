"""Fetching the due feeds of a source into its archive (the indexing run's listing
calls this; ``ragline status`` and the sensor never do)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rag_sources.kinds.feeds import archive
from rag_sources.kinds.feeds.archive import FeedSpec, FeedState
from rag_sources.kinds.feeds.config import FeedsSourceConfig
from rag_sources.kinds.feeds.fetch import Fetched, FetchError, feed_label, fetch_feed, quoted
from rag_sources.kinds.feeds.parse import Feed, parse_feed


@dataclass
class FeedOutcome:
    url: str
    status: str  # "fetched", "not-modified", "error", "not-due", "refused"
    new: int = 0
    updated: int = 0
    message: str | None = None


@dataclass
class RefreshReport:
    outcomes: list[FeedOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)


def refresh_feeds(
    config: FeedsSourceConfig,
    state_dir: Path,
    *,
    now: datetime | None = None,
    force: bool = False,
) -> RefreshReport:
    """Fetch each feed that is due (``force``: every feed; conditional requests keep
    that cheap) and store what it gives in the archive. One feed's failure, whatever
    it is, is recorded in its state and never stops the others."""
    now = now or archive.utcnow()
    report = RefreshReport()
    for spec in archive.configured_feeds(config):
        if spec.refused:  # never fetched; the listing shows why
            report.outcomes.append(FeedOutcome(spec.url, "refused", message=spec.refused))
            continue
        aside = None
        try:
            state = archive.load_state(state_dir, spec)
        except archive.ArchiveError as exc:
            aside = f"{exc}; it was set aside as {archive.set_aside(state_dir, spec).name}"
            state = None
        if not force and not archive.is_due(spec, state, now):
            report.outcomes.append(FeedOutcome(spec.url, "not-due"))
            continue
        state = state or FeedState(url=spec.url)
        try:
            outcome = _refresh_one(config, spec, state, now)
        except Exception as exc:  # a bug or a parser's crash on this feed: its problem only
            state.error = f"{feed_label(spec.url)}: the feed cannot be read ({quoted(exc)})"
            outcome = FeedOutcome(spec.url, "error", message=state.error)
        if aside:
            state.warning = f"{aside}; {state.warning}" if state.warning else aside
            state.warning_entry = state.warning_entry or next(iter(state.entries), None)
        archive.save_state(state_dir, state)
        report.outcomes.append(outcome)
    return report


# Answers that mean a remembered feed is gone: its page is asked again.
_GONE = frozenset({404, 410})


def _refresh_one(
    config: FeedsSourceConfig, spec: FeedSpec, state: FeedState, now: datetime
) -> FeedOutcome:
    state.last_fetch = now.isoformat()
    remembered = state.feed_url  # the feed a web page named, found at an earlier poll
    fetched: Fetched | None = None
    parsed: Feed | None = None
    try:
        fetched, parsed = _read(config, spec, state, remembered or spec.url)
    except FetchError as exc:
        if remembered is None or exc.status not in _GONE:
            return _failed(spec, state, str(exc), answered=False)
    if remembered is not None and (fetched is None or (parsed and parsed.problem)):
        # The feed the page named is gone or broken: ask the page again.
        state.feed_url = None
        state.etag = state.last_modified = None
        try:
            fetched, parsed = _read(config, spec, state, spec.url)
        except FetchError as exc:
            return _failed(spec, state, str(exc), answered=False)
    assert fetched is not None
    if parsed is not None and parsed.feed_links and state.feed_url is None:
        found = _discover(config, spec, state, parsed.feed_links[0])
        if isinstance(found, str):
            return _failed(spec, state, found)
        fetched, parsed = found
    state.last_status = fetched.status
    if parsed is None:  # 304: unchanged
        state.error = None
        state.last_success = state.last_fetch
        # A server may send new validators with a 304; keep the old ones otherwise.
        state.etag = fetched.etag or state.etag
        state.last_modified = fetched.last_modified or state.last_modified
        return FeedOutcome(spec.url, "not-modified")
    if parsed.problem is not None:
        return _failed(spec, state, parsed.problem)
    state.error = None
    state.last_success = state.last_fetch
    state.etag, state.last_modified = fetched.etag, fetched.last_modified
    state.title = parsed.title or state.title
    state.link = parsed.link or state.link
    state.format = parsed.format
    new, updated = state.merge(parsed.entries, now)
    state.warning = parsed.warning
    state.warning_entry = archive.entry_id(parsed.entries[0]) if parsed.warning else None
    return FeedOutcome(spec.url, "fetched", new, updated, parsed.warning)


def _read(
    config: FeedsSourceConfig,
    spec: FeedSpec,
    state: FeedState,
    url: str,
    conditional: bool = True,
) -> tuple[Fetched, Feed | None]:
    """Fetch ``url`` for the feed ``spec`` (conditionally: with the state's
    validators) and parse it; (fetched, None) when unchanged. Raises ``FetchError``."""
    fetched = fetch_feed(
        url,
        etag=state.etag if conditional else None,
        last_modified=state.last_modified if conditional else None,
        timeout=config.timeout_seconds,
        max_bytes=config.max_feed_bytes,
        user_agent=config.user_agent,
        reach_of=None if url == spec.url else spec.url,
    )
    if fetched.not_modified:
        return fetched, None
    parsed = parse_feed(
        fetched.content or b"", fetched.headers, feed_label(url),
        max_depth=config.limits.max_nesting_depth, base_url=fetched.url,
    )  # fmt: skip
    return fetched, parsed


def _discover(
    config: FeedsSourceConfig, spec: FeedSpec, state: FeedState, target: str
) -> tuple[Fetched, Feed] | str:
    """Read the feed a web page names (its first ``<link rel="alternate">``), under
    the page's address rules; remembered in the state for the next polls. Returns
    what to record when it cannot be read."""
    page = feed_label(spec.url)
    try:
        fetched, parsed = _read(config, spec, state, target, conditional=False)
    except FetchError as exc:
        return f"{page}: a web page, whose feed {target} cannot be fetched: {exc}"
    assert parsed is not None  # an unconditional fetch is never a 304
    if parsed.feed_links:
        return f"{page}: a web page, whose feed {target} is a web page too; list the feed's address"
    if parsed.problem is not None:
        return f"{page}: a web page, whose feed {target} cannot be read: {parsed.problem}"
    state.feed_url = target
    return fetched, parsed


def _failed(spec: FeedSpec, state: FeedState, message: str, answered: bool = True) -> FeedOutcome:
    """Record a failed poll. ``answered``: the server sent something unreadable, whose
    validators must not turn the next fetch into a 304 (a fetch error keeps them)."""
    state.error = message
    if answered:
        state.etag = state.last_modified = None
    return FeedOutcome(spec.url, "error", message=message)
