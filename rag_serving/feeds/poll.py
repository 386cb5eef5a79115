"""Fetching the due feeds of a source into its archive (the indexing run's listing
calls this; ``ragline status`` and the sensor never do)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rag_serving.config import FeedsSourceConfig
from rag_serving.feeds import archive
from rag_serving.feeds.archive import FeedSpec, FeedState
from rag_serving.feeds.fetch import FetchError, feed_label, fetch_feed, quoted
from rag_serving.feeds.parse import parse_feed


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


def _refresh_one(
    config: FeedsSourceConfig, spec: FeedSpec, state: FeedState, now: datetime
) -> FeedOutcome:
    state.last_fetch = now.isoformat()
    try:
        fetched = fetch_feed(
            spec.url,
            etag=state.etag,
            last_modified=state.last_modified,
            timeout=config.timeout_seconds,
            max_bytes=config.max_feed_bytes,
            user_agent=config.user_agent,
        )
    except FetchError as exc:
        state.error = str(exc)
        return FeedOutcome(spec.url, "error", message=state.error)
    state.last_status = fetched.status
    if fetched.not_modified:
        state.error = None
        state.last_success = state.last_fetch
        # A server may send new validators with a 304; keep the old ones otherwise.
        state.etag = fetched.etag or state.etag
        state.last_modified = fetched.last_modified or state.last_modified
        return FeedOutcome(spec.url, "not-modified")
    parsed = parse_feed(
        fetched.content or b"", fetched.headers, feed_label(spec.url),
        max_depth=config.limits.max_nesting_depth,
    )  # fmt: skip
    if parsed.problem is not None:
        state.error = parsed.problem
        # Validators of a broken answer must not turn the next fetch into a 304.
        state.etag = state.last_modified = None
        return FeedOutcome(spec.url, "error", message=parsed.problem)
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
