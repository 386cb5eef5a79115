"""A `feeds` source through the real stack: feeds served by a loopback HTTP server
(and a local feed file), fetched and indexed by the Dagster job into LanceDB and
Tantivy, searched with the bundled model. Three runs share one index: the first
indexes everything, the second gets 304s, the third sees an updated entry, a
dropped one and a new one."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta

import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.index.layout import IndexLayout
from rag_serving.search import SearchFilters
from rag_serving.search.engine import SearchEngine
from rag_serving.status import index_status
from rag_sources.kinds.feeds import archive
from ragline.indexing import index_sources
from tests.conftest import SHARED_DATA, write_config
from tests.feed_server import FeedServer, unused_port

pytestmark = pytest.mark.shared_data

INPUTS = SHARED_DATA / "corpora" / "feeds" / "rss-parser-inputs"
FIXTURES = SHARED_DATA / "corpora" / "feeds" / "feed-rs-fixtures"
UA = "ragline-feeds/1 (a personal, local feed index)"
LIVE_ENTRIES = {
    "zebra": ("Zebra herds migrate north", "Zebras crossed the Mara river in record numbers."),
    "volcano": ("Volcano wakes in Iceland", "Lava fountains near Grindavik lit the night sky."),
}


def live_feed(entries: dict[str, tuple[str, str]]) -> bytes:
    items = "".join(
        f"<item><guid>urn:live:{key}</guid><title>{title}</title>"
        f"<link>https://live.example/{key}</link><author>desk@live.example (Dana Desk)</author>"
        f"<pubDate>Tue, 02 Apr 2024 10:00:00 GMT</pubDate>"
        f"<description><![CDATA[<p>{text}</p><script>evil()</script>]]></description></item>"
        for key, (title, text) in entries.items()
    )
    return (
        f'<?xml version="1.0"?><rss version="2.0"><channel><title>Live Desk</title>'
        f"<link>https://live.example/</link>{items}</channel></rss>"
    ).encode()


def age_archive(config: RaglineConfig, hours: int = 2) -> None:
    """Move every feed's last fetch back, as if the poll interval had passed."""
    folder = IndexLayout(config.data_dir).source_state_dir("news") / archive.FEEDS_FOLDER
    for path in folder.glob("*.json"):
        raw = json.loads(path.read_text())
        if raw.get("last_fetch"):
            moved = datetime.fromisoformat(raw["last_fetch"]) - timedelta(hours=hours)
            raw["last_fetch"] = moved.isoformat()
            path.write_text(json.dumps(raw))


def index(config: RaglineConfig) -> dict:
    [outcome] = index_sources(config, [], full=False)
    assert outcome.success, outcome.error
    return outcome.metadata


@pytest.fixture(scope="module")
def feeds(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("feeds-source")
    local = root / "local" / "gulp releases.atom"
    local.parent.mkdir()
    shutil.copy(INPUTS / "gulp-atom.atom", local)
    with FeedServer() as server:
        server.put("/heise.atom", (INPUTS / "heise.atom").read_bytes(), "application/atom+xml")
        server.put("/portugal.rss", (INPUTS / "encoding.rss").read_bytes(), "text/xml")
        server.put(
            "/spec.json",
            (FIXTURES / "jsonfeed" / "jsonfeed_spec_1.json").read_bytes(),
            "application/feed+json",
        )
        server.put("/live.xml", live_feed(LIVE_ENTRIES))
        # malformed on purpose: one still yields its entry, one yields nothing
        server.put("/scattered.xml", (FIXTURES / "atom" / "atom_scattered.xml").read_bytes())
        server.put("/invalid.xml", (FIXTURES / "rss2" / "rss_2.0_invalid_1.xml").read_bytes())
        server.put("/slow.xml", live_feed(LIVE_ENTRIES), delay_s=3)
        dead = f"http://127.0.0.1:{unused_port()}/feed.xml"
        source = {
            "name": "news",
            "kind": "feeds",
            "urls": [
                server.url("/heise.atom"),
                server.url("/portugal.rss"),
                {"url": server.url("/spec.json"), "name": "JSON Feed spec"},
                server.url("/live.xml"),
                server.url("/slow.xml"),
                server.url("/scattered.xml"),
                server.url("/invalid.xml"),
                dead,
                str(local),
            ],
            "timeout_seconds": 1,
        }
        config = parse_config_file(write_config(root, [source], root / "data"))
        runs = [index(config)]
        first_requests = len(server.requests)
        age_archive(config)
        runs.append(index(config))
        second = server.requests[first_requests:]
        server.put(
            "/live.xml",
            live_feed(
                {
                    "zebra": (LIVE_ENTRIES["zebra"][0], "Zebras turned back at the flooded ford."),
                    "glacier": ("Glacier retreat measured", "The Rhone glacier lost 4 percent."),
                }
            ),
        )
        age_archive(config)
        runs.append(index(config))
        yield {"config": config, "server": server, "runs": runs, "second": second,
               "dead": dead, "local": local}  # fmt: skip


@pytest.fixture(scope="module")
def engine(feeds) -> SearchEngine:
    return SearchEngine(feeds["config"])


def scan(metadata: dict) -> dict:
    return metadata["raw_files"]


def test_entries_are_searchable_with_title_feed_author_and_date(feeds, engine) -> None:
    hits = engine.search("heise developer", k=20).hits
    assert hits and all(h.file_type == "entry" for h in hits)
    store = engine.store
    docs = store.read("documents", columns=["path", "title", "facets", "modified"]).to_pylist()
    heise = [d for d in docs if "feed_name:heise developer neueste Meldungen" in d["facets"]]
    assert len(heise) == 15
    assert all(d["modified"] is not None and d["modified"].tzinfo for d in docs)
    portugal = engine.search(
        "presidente da Raríssimas",
        k=5,
        filters=SearchFilters(feeds=("Jornal de Notícias - Últimas Notícias",)),
    ).hits
    assert portugal[0].title == "Mãe de utente é a nova presidente da Raríssimas"
    assert portugal[0].feed == "Jornal de Notícias - Últimas Notícias"
    assert portugal[0].modified.isoformat() == "2018-01-03T13:47:00+00:00"
    # a JSON Feed with a configured name, and a local feed file
    spec = engine.search("JSON is simpler to read and write than XML", k=3).hits[0]
    assert spec.title == "Announcing JSON Feed" and spec.feed == "JSON Feed spec"
    assert spec.author == "Brent Simmons and Manton Reece"
    gulp = [d for d in docs if "feed_name:Release notes from gulp" in d["facets"]]
    assert len(gulp) == 10
    # the entry's HTML was cleaned: no script text, the author and link in the header
    zebra = engine.search("zebras river", k=1, filters=SearchFilters(authors=("dana desk",))).hits
    assert zebra[0].author == "Dana Desk" and zebra[0].feed == "Live Desk"
    document = engine.store.read(
        "documents", where=f"doc_id = '{zebra[0].doc_id}'", columns=["body"]
    ).to_pylist()[0]
    assert (
        "evil()" not in document["body"] and "Link: https://live.example/zebra" in document["body"]
    )
    assert "Feed: Live Desk" in document["body"]


def test_the_polite_user_agent_and_conditional_requests_are_sent(feeds) -> None:
    server = feeds["server"]
    assert {r.headers.get("User-Agent") for r in server.requests} == {UA}
    second = {r.path: r for r in feeds["second"] if r.path != "/slow.xml"}
    assert set(second) == {
        "/heise.atom", "/portugal.rss", "/spec.json", "/live.xml", "/scattered.xml",
        "/invalid.xml",
    }  # fmt: skip
    # a feed that could not be parsed is fetched whole again: its validators were dropped
    invalid = second.pop("/invalid.xml")
    assert invalid.status == 200 and "If-None-Match" not in invalid.headers
    assert all(r.status == 304 and "If-None-Match" in r.headers for r in second.values())


def test_a_second_run_with_304s_indexes_nothing_new(feeds) -> None:
    first, second, _ = feeds["runs"]
    assert scan(first)["new"] >= 15 + 40 + 1 + 2 + 10
    assert scan(second)["new"] == scan(second)["changed"] == scan(second)["deleted"] == 0
    assert second["embeddings"]["embedded"] == 0


def test_an_updated_entry_is_reindexed_and_a_dropped_one_stays(feeds, engine) -> None:
    third = feeds["runs"][2]
    assert (scan(third)["new"], scan(third)["changed"], scan(third)["deleted"]) == (1, 1, 0)
    updated = engine.search("zebras flooded ford", k=1).hits[0]
    assert updated.title == "Zebra herds migrate north" and "ford" in updated.snippet
    assert not any("Mara river" in h.snippet for h in engine.search("Mara river zebras", k=5).hits)
    dropped = engine.search("lava fountains Grindavik", k=1).hits[0]  # gone from the feed
    assert dropped.title == "Volcano wakes in Iceland"
    assert engine.search("Rhone glacier", k=1).hits[0].title == "Glacier retreat measured"


def test_an_unreachable_and_a_slow_feed_are_problems_while_others_index(feeds) -> None:
    config, server, dead = feeds["config"], feeds["server"], feeds["dead"]
    issues = {i.path: i for i in index_status(config).sources[0].issues}
    dead_issue = issues[archive.feed_id(dead) + "/"]
    assert dead_issue.severity == "error" and dead_issue.message.startswith(dead)
    assert "cannot connect" in dead_issue.message
    slow = issues[archive.feed_id(server.url("/slow.xml")) + "/"]
    assert "no answer within 1 s" in slow.message
    invalid = issues[archive.feed_id(server.url("/invalid.xml")) + "/"]
    assert invalid.severity == "error" and "malformed feed" in invalid.message
    assert len([k for k in issues if k.endswith("/")]) == 3
    # the malformed feed that still yields an entry: indexed, with a warning
    scattered = archive.feed_id(server.url("/scattered.xml")) + "/"
    [warned] = [i for k, i in issues.items() if k.startswith(scattered) and k != scattered]
    assert warned.severity == "warning" and "entries were read all the same" in warned.message
    assert SearchEngine(config).search("Scattered Thoughts", k=3).hits
    # `ragline status` lists the archive as the scan did: no entry pending
    pending = index_status(config).sources[0].pending
    assert (pending.new, pending.changed) == (0, 0)


def test_the_sensor_asks_for_a_run_when_a_poll_period_begins(feeds, monkeypatch) -> None:
    from dagster import build_sensor_context, instance_for_test

    from rag_assets.resources import RaglineConfigResource
    from rag_assets.sensors.source_changes import build_source_changes_sensor

    config = feeds["config"]
    sensor = build_source_changes_sensor(30)
    settings = {"settings": RaglineConfigResource(config_path=str(config.config_path))}
    server = feeds["server"]

    def fetched() -> int:
        # /slow.xml answers after 3 s: an earlier scan's request, given up after 1 s,
        # can still be recorded during this test.
        with server._lock:
            return len([r for r in server.requests if r.path != "/slow.xml"])

    requests = fetched()
    now = archive.utcnow()

    def tick(cursor: str | None, at: datetime):
        monkeypatch.setattr(archive, "utcnow", lambda: at)
        return sensor(build_sensor_context(instance=instance, cursor=cursor, resources=settings))

    with instance_for_test() as instance:
        instance.add_dynamic_partitions("sources", ["news"])
        start = now.replace(minute=1, second=0, microsecond=0)
        first = tick(None, start)
        assert [r.partition_key for r in first.run_requests] == ["news"]
        assert not tick(first.cursor, start + timedelta(minutes=58)).run_requests
        due = tick(first.cursor, start + timedelta(minutes=60))  # the next hour: due
        assert [r.partition_key for r in due.run_requests] == ["news"]
    assert fetched() == requests  # the sensor fetched nothing


def test_the_cli_prints_an_entry_hit_with_author_date_and_feed(feeds) -> None:
    from click.testing import CliRunner

    from ragline.cli import cli

    config_path = str(feeds["config"].config_path)
    args = ["--config", config_path, "search", "JSON is simpler to read and write than XML"]
    args += ["--k", "1", "--feed", "json feed SPEC"]  # a feed's title, any case
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert (
        result.output.splitlines()[0]
        .strip()
        .startswith(
            "1. Announcing JSON Feed  news · Brent Simmons and Manton Reece · 2017-05-17 · "
            "JSON Feed spec"
        )
    ), result.output


def test_a_run_asked_for_by_hand_checks_every_feed_and_a_sensor_run_only_due_ones(
    feeds,
) -> None:
    from rag_assets.sources import source_kind

    config, server = feeds["config"], feeds["server"]
    source = config.source("news")
    before = len(server.requests)
    scheduled = source_kind(source, config.data_dir)  # as a sensor's run: nothing is due yet
    listed = list(scheduled.list_items())
    assert len(server.requests) == before
    assert any(item.key.endswith("/") for item in listed)  # the dead feed's problem is kept
    by_hand = source_kind(source, config.data_dir)
    by_hand.on_demand = True  # `ragline index`, MCP reindex, the UI, --full
    assert [i.key for i in by_hand.list_items()] == [i.key for i in listed]
    asked = {r.path: r for r in server.requests[before:]}
    assert {"/heise.atom", "/portugal.rss", "/spec.json", "/live.xml"} <= set(asked)
    assert asked["/heise.atom"].status == 304 and "If-None-Match" in asked["/heise.atom"].headers
