"""The archive of a feeds source: every entry ever seen, per feed, in the source's
state folder. A feed is a window (its last 10-50 entries), not the archive: an
entry that falls out of its feed stays here, and so stays indexed.

One JSON file per feed (``<state_dir>/feeds/<feed id>.json``, written atomically)
holds the feed's HTTP validators (ETag, Last-Modified), its last fetch time and
error, its title, and its entries by entry id. ``list_archived_entries`` lists it
without any network access (``ragline status`` and the indexing run share it).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from rag_sources.kinds.feeds.fetch import feed_label, is_local, local_path, quoted
from rag_sources.kinds.feeds.opml import read_opml
from rag_sources.kinds.feeds.parse import Entry
from rag_sources.listing import ListedItem

if TYPE_CHECKING:
    # the config only names a type here: the config imports this module to list items
    from rag_sources.kinds.feeds.config import FeedsSourceConfig

ARCHIVE_VERSION = 1
FEEDS_FOLDER = "feeds"


def utcnow() -> datetime:
    """The clock of poll schedules (one place, so a test can move time)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class FeedSpec:
    """One feed of a source: from ``urls`` or the OPML file."""

    url: str
    poll_minutes: int
    name: str | None = None  # the configured name, shown instead of the feed's title
    opml_title: str | None = None  # the OPML outline's title (before the first fetch)
    categories: tuple[str, ...] = ()
    refused: str | None = None  # why it is never fetched (an OPML entry that is no web feed)

    @property
    def feed_id(self) -> str:
        return feed_id(self.url)


def configured_feeds(config: FeedsSourceConfig) -> list[FeedSpec]:
    """The source's feeds: ``urls`` first, then the OPML file's; a URL listed in both
    (or twice) is one feed, with the ``urls`` entry's settings. Raises
    ``SourceUnavailableError`` for an OPML file that cannot be read."""
    feeds: dict[str, FeedSpec] = {}
    for feed in config.feeds():
        if feed.url not in feeds:
            feeds[feed.url] = FeedSpec(
                feed.url, feed.poll_minutes or config.poll_minutes, feed.name
            )
    if config.opml is not None:
        for item in read_opml(config.opml, config.limits.max_nesting_depth):
            old = feeds.get(item.url)
            if old is None:
                feeds[item.url] = FeedSpec(
                    item.url, config.poll_minutes, None, item.title, item.categories,
                    item.refused,
                )  # fmt: skip
            else:
                feeds[item.url] = FeedSpec(
                    old.url, old.poll_minutes, old.name, item.title, item.categories
                )
    return list(feeds.values())


def feed_id(url: str) -> str:
    """A short stable slug of a feed URL: its host (a local file: its name) and a hash."""
    if is_local(url):
        stem = local_path(url).stem
    else:
        stem = (urlsplit(url).hostname or "feed").removeprefix("www.")
    slug = re.sub(r"[^a-z0-9.-]+", "-", stem.lower()).strip("-.")[:40] or "feed"
    return f"{slug}-{hashlib.sha256(url.encode()).hexdigest()[:8]}"


def entry_id(entry: Entry, fallback: bool = False) -> str:
    """A short hash of the entry's guid, else its link, else title and date
    (``fallback``: link, title and date, for entries sharing a link without guid)."""
    if entry.guid and not fallback:
        basis = "g:" + entry.guid
    elif entry.link and not fallback:
        basis = "l:" + entry.link
    else:
        basis = "t:" + "\0".join(
            v or "" for v in (entry.link, entry.title, entry.published or entry.updated)
        )
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def entry_hash(entry: Entry) -> str:
    """A hash of the entry's content fields: it changes when the entry is updated."""
    text = json.dumps(entry.as_json(), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


@dataclass
class FeedState:
    """What the archive holds of one feed."""

    url: str
    title: str | None = None
    link: str | None = None
    format: str = ""
    etag: str | None = None
    last_modified: str | None = None
    last_fetch: str | None = None  # ISO time of the last attempt, successful or not
    last_success: str | None = None
    last_status: int | None = None  # HTTP status of the last answer (304: unchanged)
    error: str | None = None  # why the last attempt failed (one line), else None
    warning: str | None = None  # what was wrong with a feed read all the same
    warning_entry: str | None = None  # the entry that carries the warning
    # the feed a configured web page names (<link rel="alternate">), fetched in its stead
    feed_url: str | None = None
    # entry id → {"entry": Entry fields, "hash", "first_seen", "last_seen"}
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def last_fetch_at(self) -> datetime | None:
        return datetime.fromisoformat(self.last_fetch) if self.last_fetch else None

    def as_json(self) -> dict[str, Any]:
        return {"version": ARCHIVE_VERSION, **self.__dict__}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> FeedState:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in known})

    def entry(self, eid: str) -> Entry | None:
        record = self.entries.get(eid)
        if record is None:
            return None
        fields = Entry.__dataclass_fields__
        return Entry(**{k: v for k, v in record["entry"].items() if k in fields})

    def merge(self, entries: list[Entry], now: datetime) -> tuple[int, int]:
        """Add the entries of a fetch (deduplicated by guid, else link); returns
        (new, updated). Entries already archived and absent from the fetch stay."""
        stamp = now.isoformat()
        taken: dict[str, Entry] = {}
        new = updated = 0
        for entry in entries:
            eid = entry_id(entry)
            if eid in taken:
                same = taken[eid]
                if entry.guid or (entry.title == same.title and entry.content == same.content):
                    continue  # the same entry listed twice
                eid = entry_id(entry, fallback=True)  # a different entry with the same link
                if eid in taken:
                    continue
            taken[eid] = entry
            digest = entry_hash(entry)
            record = self.entries.get(eid)
            if record is None:
                self.entries[eid] = {
                    "entry": entry.as_json(), "hash": digest, "first_seen": stamp,
                    "last_seen": stamp,
                }  # fmt: skip
                new += 1
                continue
            record["last_seen"] = stamp
            if record["hash"] != digest:
                record.update(entry=entry.as_json(), hash=digest)
                updated += 1
        return new, updated


def archive_path(state_dir: Path, fid: str) -> Path:
    return state_dir / FEEDS_FOLDER / f"{fid}.json"


class ArchiveError(Exception):
    """A feed's archive file cannot be read; ``str(e)`` names it."""


def load_state(state_dir: Path | None, spec: FeedSpec) -> FeedState | None:
    """The archived state of a feed, or None when it was never fetched; raises
    ``ArchiveError`` when its file cannot be read."""
    if state_dir is None:
        return None
    path = archive_path(state_dir, spec.feed_id)
    try:
        state = FeedState.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        # named inside the source's state folder: messages never name server paths
        raise ArchiveError(
            f"the feed archive {FEEDS_FOLDER}/{path.name} cannot be read ({quoted(exc)})"
        ) from None
    return state if state.url == spec.url else None


def set_aside(state_dir: Path, spec: FeedSpec) -> Path:
    """Move an unreadable archive file aside (``.corrupt``) so the feed starts afresh."""
    path = archive_path(state_dir, spec.feed_id)
    target = path.with_suffix(".corrupt")
    path.replace(target)
    return target


def save_state(state_dir: Path, state: FeedState) -> None:
    """Write a feed's state atomically (a crash leaves the old file or the new one)."""
    path = archive_path(state_dir, feed_id(state.url))
    if not isinstance(path, Path):  # shared beside an index on object storage: one PUT
        path.write_text(json.dumps(state.as_json(), ensure_ascii=False, separators=(",", ":")))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state.as_json(), handle, ensure_ascii=False, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ---- schedule ----------------------------------------------------------------


def poll_epoch(moment: datetime, poll_minutes: int) -> int:
    """Which poll period ``moment`` falls in. Periods are aligned on the clock (every
    hour on the hour for 60 minutes), so feeds of one interval fall due together and
    one run fetches them all."""
    return int(moment.timestamp() // (poll_minutes * 60))


def is_due(spec: FeedSpec, state: FeedState | None, now: datetime) -> bool:
    """A feed is due when it was never fetched, or last fetched in an earlier period."""
    last = state.last_fetch_at if state is not None else None
    if last is None:
        return True
    return poll_epoch(last, spec.poll_minutes) < poll_epoch(now, spec.poll_minutes)


def schedule_signal(config: FeedsSourceConfig, now: datetime | None = None) -> str:
    """Changes when the feed list changes or any feed's poll period begins (no I/O
    but the OPML file): the sensor then requests a run, which fetches the due feeds."""
    now = now or utcnow()
    digest = hashlib.sha256()
    for spec in configured_feeds(config):
        digest.update(f"{spec.url}\0{spec.poll_minutes}\0{spec.name}\0".encode())
        digest.update(f"{poll_epoch(now, spec.poll_minutes)}\n".encode())
    return digest.hexdigest()[:20]


# ---- listing -------------------------------------------------------------------


def display_title(spec: FeedSpec, state: FeedState | None) -> str:
    """The feed's name as shown: the configured name, else its own title."""
    title = spec.name or (state.title if state else None) or spec.opml_title
    if title:
        return title
    if is_local(spec.url):
        return local_path(spec.url).name
    return urlsplit(spec.url).hostname or spec.url


def listed_fingerprint(state: FeedState, eid: str, title: str) -> str:
    """An entry's fingerprint: its content, its feed's shown title (a facet), and the
    feed's warning when this entry carries it."""
    record = state.entries[eid]
    warning = state.warning if state.warning_entry == eid else ""
    basis = f"{record['hash']}\0{title}\0{warning or ''}"
    return hashlib.sha256(basis.encode()).hexdigest()[:20]


def list_archived_entries(
    config: FeedsSourceConfig, state_dir: Path | None
) -> Iterator[ListedItem]:
    """Every archived entry of the source's configured feeds (key ``<feed id>/<entry
    id>``), and for a feed whose last fetch failed a problem ``<feed id>/`` that keeps
    its entries, and for an OPML entry that is no web feed a problem ``<feed id>/``
    saying so. Nothing is fetched: a feed never fetched lists nothing yet."""
    for spec in configured_feeds(config):
        fid = spec.feed_id
        if spec.refused:
            yield ListedItem(f"{fid}/", "!", None, None, spec.refused, "skipped")
            continue
        try:
            state = load_state(state_dir, spec)
        except ArchiveError as exc:
            message = (
                f"{feed_label(spec.url)}: {exc}; its indexed entries are kept (the next fetch "
                "sets it aside)"
            )
            yield ListedItem(f"{fid}/", "!", None, None, message, "error", True)
            continue
        if state is None:
            continue
        if state.error:
            yield ListedItem(
                f"{fid}/", "!", None, None, state.error, severity="error", unavailable=True
            )
        title = display_title(spec, state)
        for eid in sorted(state.entries):
            record = state.entries[eid]["entry"]
            size = sum(len(record.get(k) or "") for k in ("title", "content", "summary"))
            yield ListedItem(f"{fid}/{eid}", listed_fingerprint(state, eid, title), size, None)
