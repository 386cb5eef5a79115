"""The ``[[sources]]`` settings of a feeds source."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from rag_sources.config import FileSourceConfig, Strict, absolute_path
from rag_sources.listing import ListedItem


class FeedUrl(Strict):
    """One feed with settings of its own (``{ url = "...", poll_minutes = 15 }``)."""

    url: str
    poll_minutes: int | None = Field(default=None, ge=1)
    name: str | None = None  # shown instead of the feed's own title

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_feed_url(value)


def check_feed_url(value: str) -> str:
    """``value`` stripped if it is an http(s) or file URL or a local path; else a
    ValueError saying what to give."""
    value = value.strip()
    if not value:
        raise ValueError("a feed URL is empty; give an http(s):// URL or a local file path")
    scheme = (
        value.split(":", 1)[0].lower() if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value) else ""
    )
    if scheme and scheme not in ("http", "https", "file"):
        raise ValueError(
            f"{value!r} is not a feed URL ragline can fetch: use http://, https:// or a local path"
        )
    if any(c.isspace() for c in value) and scheme in ("http", "https"):
        raise ValueError(f"{value!r} holds spaces; a URL cannot (encode them as %20)")
    return value


class FeedsSourceConfig(FileSourceConfig):
    """RSS, Atom and JSON Feed feeds (``urls`` and/or an ``opml`` file), fetched over
    HTTP with conditional requests on each feed's poll schedule. Entries that fall
    out of a feed stay indexed: a feed is a window, not the archive."""

    shared_state: ClassVar[bool] = True  # the archive of fetched entries
    kind: Literal["feeds"]
    DETECT_ORDER: ClassVar[int] = 50

    @classmethod
    def detect_url(cls, url: str) -> str | None:
        check_feed_url(url)
        return "an http(s) URL: a feed"

    @classmethod
    def detect_file(cls, path: Path, head: bytes) -> str | None:
        suffix = path.suffix.lower()
        if suffix == ".opml":
            return "an OPML file: a feed reader's subscriptions"
        if suffix in (".rss", ".atom", ".xml", ".rdf"):
            return "a feed file"
        return None

    OPML_BLOCK: ClassVar[str] = """
[[sources]]
name = "{name}"
kind = "feeds"
opml = "{path}"           # a feed reader's subscriptions; add more with urls = ["https://..."]
poll_minutes = 60
"""
    SOURCE_BLOCK: ClassVar[str] = """
[[sources]]
name = "{name}"
kind = "feeds"
urls = ["{path}"]         # more URLs, or {{ url = "...", poll_minutes = 15 }}
# opml = "subscriptions.opml"   # a feed reader's export
poll_minutes = 60
"""
    path: Path | None = None  # not used: feeds have URLs (a local feed file may be one)
    urls: list[str | FeedUrl] = []

    def path_problems(self, where: Callable[[str], str]) -> list[str]:
        """The OPML file must exist; the URLs are checked when fetched."""
        if self.opml is None or self.opml.is_file():
            return []
        if not self.opml.exists():
            return [
                f"{where('opml')}: {self.opml} does not exist; export it from your feed reader again"
            ]
        return [f"{where('opml')}: {self.opml} is not a file; give the .opml file itself"]

    def with_absolute_paths(self, base: Path) -> FeedsSourceConfig:
        update: dict[str, Any] = {"urls": [_absolute_feed(v, base) for v in self.urls]}
        if self.opml is not None:
            update["opml"] = absolute_path(self.opml.expanduser(), base)
        return self.model_copy(update=update)

    opml: Path | None = None  # an OPML export of a feed reader's subscriptions
    poll_minutes: int = Field(default=60, ge=1)  # how often each feed is fetched
    timeout_seconds: float = Field(default=20.0, gt=0, le=600)
    max_feed_bytes: int = Field(default=10_000_000, ge=1_000)  # larger responses are refused
    # Named in every request, so a site's owner can see who fetches and why.
    user_agent: str = "ragline-feeds/1 (a personal, local feed index)"

    @field_validator("urls")
    @classmethod
    def _urls(cls, value: list[str | FeedUrl]) -> list[str | FeedUrl]:
        return [check_feed_url(v) if isinstance(v, str) else v for v in value]

    @model_validator(mode="after")
    def _some_feeds(self) -> FeedsSourceConfig:
        if not self.urls and self.opml is None:
            raise ValueError(
                f'source {self.name!r} lists no feeds: give urls = ["https://..."] '
                'and/or opml = "subscriptions.opml"'
            )
        return self

    @classmethod
    def source_block(cls, name: str, path: str) -> str:
        """A feed's URL, or an OPML file of a feed reader's subscriptions."""
        template = cls.OPML_BLOCK if path.lower().endswith(".opml") else cls.SOURCE_BLOCK
        return template.format(name=name, path=path)

    def listed_items(self, state_dir: Path | None) -> Iterator[ListedItem]:
        """The entries fetched so far (nothing is fetched here)."""
        from rag_sources.kinds.feeds.archive import list_archived_entries

        return list_archived_entries(self, state_dir)

    def feeds(self) -> list[FeedUrl]:
        """The configured feeds (not those of the OPML file), each as a ``FeedUrl``."""
        return [FeedUrl(url=v) if isinstance(v, str) else v for v in self.urls]


def _absolute_feed(value: str | FeedUrl, base: Path) -> str | FeedUrl:
    url = value if isinstance(value, str) else value.url
    if "://" in url:
        return value
    resolved = str(absolute_path(Path(url).expanduser(), base))
    return resolved if isinstance(value, str) else value.model_copy(update={"url": resolved})
