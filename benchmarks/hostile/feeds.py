"""Hostile feeds (issue 26 items 2, 5, 7 and 13) for ``benchmarks/hostile_inputs.py``.

Each case serves its feeds from the runner's HTTP server on 127.0.0.1 beside good
feeds, and returns a ``feeds`` source. A redirect from a public address into this
machine cannot be staged here (the runner's server is on loopback, where any
redirect is allowed); tests/test_hostile_feeds.py checks it between this machine's
network address and loopback.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from benchmarks.hostile import HostileCase, HttpFixture
from tests.feed_server import rss, zeros_gzip

GIB = 1 << 30
_GZIP_CACHE: dict[int, bytes] = {}


GOOD = rss("Good news", "Zebra herds migrate north", "Volcano wakes in Iceland")


def cached_zeros_gzip(size: int) -> bytes:
    """``zeros_gzip`` once per size (two cases serve the same 4 GiB bomb)."""
    if size not in _GZIP_CACHE:
        _GZIP_CACHE[size] = zeros_gzip(size)
    return _GZIP_CACHE[size]


def feeds_source(*urls: str, **settings: Any) -> dict[str, Any]:
    return {"kind": "feeds", "urls": list(urls), "timeout_seconds": 10, **settings}


def opml_local_files(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """An OPML export naming a local feed file three ways (file://, absolute,
    ../relative) beside one web feed: only the web feed may be read."""
    private = folder / "private" / "diary.xml"
    private.parent.mkdir()
    private.write_bytes(rss("Diary", "The safe's code is 4711", "Passwords live in pass.kdbx"))
    opml = folder / "lists" / "subscriptions.opml"
    opml.parent.mkdir()
    opml.write_text(
        '<?xml version="1.0"?><opml version="2.0"><head><title>subs</title></head><body>'
        f'<outline text="News" xmlUrl="{http.route("/opml-good.xml", GOOD)}"/>'
        f'<outline text="Diary (file URL)" xmlUrl="{private.as_uri()}"/>'
        f'<outline text="Diary (path)" xmlUrl="{private}"/>'
        '<outline text="Diary (relative)" xmlUrl="../private/diary.xml"/>'
        "</body></opml>"
    )
    return {"kind": "feeds", "opml": str(opml), "timeout_seconds": 10}


def stacked_gzip(folder: Path, http: HttpFixture) -> dict[str, Any]:
    body = gzip.compress(cached_zeros_gzip(4 * GIB), 9)
    bomb = http.route("/stacked.xml", body, {"Content-Encoding": "gzip, gzip"})
    return feeds_source(bomb, http.route("/stacked-good.xml", GOOD))


def gzip_bomb(folder: Path, http: HttpFixture) -> dict[str, Any]:
    bomb = http.route("/bomb.xml", cached_zeros_gzip(4 * GIB), {"Content-Encoding": "gzip"})
    return feeds_source(bomb, http.route("/bomb-good.xml", GOOD))


def deep_json_feed(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A JSON Feed nested 100,000 deep listed first, then 11 good feeds."""
    deep = (
        b'{"version":"https://jsonfeed.org/version/1.1","title":"Deep","items":'
        + b"[" * 100_000 + b"]" * 100_000 + b"}"
    )  # fmt: skip
    urls = [http.route("/deep.json", deep, {"Content-Type": "application/feed+json"})]
    for n in range(11):
        feed = {
            "version": "https://jsonfeed.org/version/1.1", "title": f"Good {n}",
            "items": [{"id": f"g{n}", "content_text": f"Glacier number {n} retreats."}],
        }  # fmt: skip
        kind = {"Content-Type": "application/feed+json"}
        urls.append(http.route(f"/good-{n}.json", json.dumps(feed).encode(), kind))
    return feeds_source(*urls)


def over_sent_content_length(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A server whose Content-Length stops 600 bytes before its body ends (the rest a
    second response with a secret header), then a good feed on the same server: the
    good feed must get a connection of its own."""
    head = b"<?xml version='1.0'?><rss version='2.0'><channel><title>Liar</title>"
    leak = b"HTTP/1.1 200 OK\r\nX-Secret: " + b"s" * 560 + b"\r\n\r\n"
    liar = http.route("/liar.xml", head + leak, {"Content-Length": str(len(head))})
    return feeds_source(liar, http.route("/after-liar.xml", GOOD))


CASES = [
    HostileCase(
        "OPML naming a local feed file (file://, absolute, ../relative)",
        2, opml_local_files, "an opml file may", good_items=2,
    ),
    HostileCase(
        "Content-Encoding: gzip, gzip, 6.8 kB unpacking to 4 GiB",
        5, stacked_gzip, "compressed 2 times over", good_items=2,
    ),
    HostileCase(
        "Content-Encoding: gzip, 4 MB unpacking to 4 GiB",
        5, gzip_bomb, "once decompressed", good_items=2,
    ),
    HostileCase(
        "JSON Feed nested 100,000 deep, then 11 good feeds",
        7, deep_json_feed, "nested deeper than max_nesting_depth", good_items=11,
    ),
    HostileCase(
        "Content-Length 600 bytes short of the body, then a feed on the same connection",
        13, over_sent_content_length, "malformed feed", good_items=2,
    ),
]  # fmt: skip
