"""The index on object storage (``index_uri = "s3://..."``) and several search hosts.

Everything runs for real: moto's S3 server on 127.0.0.1 (which honours conditional
writes, as AWS S3 does), `ragline index` through Dagster in-process, and search
hosts in other processes whose ``data_dir`` starts empty. The store that ignores
conditional writes is a stand-in (tests/s3_server.py: a proxy dropping the headers).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from rag_sources.errors import ManifestConflictError, ObjectStoreError
from tests.conftest import HUB_PLUGINS, REPO, build_index, write_config
from tests.s3_server import ConditionIgnoringProxy, S3Server, moto_server, s3_env, subprocess_env

__all__ = ["moto_server", "s3_env"]  # fixtures used here

NOTES = ["3d-graph.md", "spreadsheets.md", "calendar.md", "dataview.md", "kanban-status-updater.md"]
NEW_WORD = "zeppelinwharf"  # in no note until a test writes it

# A search host that stays up: one query per stdin line, one JSON result per stdout line.
SEARCH_HOST = """
import json, sys
from pathlib import Path
from rag_serving.config import parse_config_file
from rag_serving.search import SearchEngine
engine = SearchEngine(parse_config_file(Path(sys.argv[1])))
print("ready", flush=True)
for line in sys.stdin:
    result = engine.search(line.strip(), k=5, mode="bm25")
    print(json.dumps(result.as_json()), flush=True)
"""


@pytest.fixture(scope="module")
def remote(
    moto_server: S3Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RaglineConfig]:
    """A few hub notes indexed into ``s3://ragline-test/index`` by this process."""
    if not HUB_PLUGINS.is_dir():
        pytest.fail(f"{HUB_PLUGINS} is missing: run with ../shared/data or -m 'not shared_data'")
    with pytest.MonkeyPatch.context() as patch:
        for name in [n for n in os.environ if n.startswith("AWS_")]:
            patch.delenv(name)
        for name, value in moto_server.env().items():
            patch.setenv(name, value)
        root = tmp_path_factory.mktemp("s3-writer")
        vault = root / "vault"
        vault.mkdir()
        for name in NOTES:
            shutil.copy(HUB_PLUGINS / name, vault / name)
        bucket = moto_server.bucket("ragline-test")
        path = write_config(root, [{"name": "hub", "kind": "markdown", "path": str(vault)}])
        _add_keys(path, index_uri=f"s3://{bucket}/index")
        yield build_index(path)


def _add_keys(path: Path, **keys: object) -> None:
    import tomllib

    import tomli_w

    data = tomllib.loads(path.read_text(encoding="utf-8"))
    path.write_text(tomli_w.dumps({**keys, **data}), encoding="utf-8")


def _search_host_config(writer: RaglineConfig, root: Path) -> Path:
    """A host with the writer's index_uri, an empty data_dir and no copy of the notes."""
    sources = [{"name": "hub", "kind": "markdown", "path": str(root / "not-on-this-host")}]
    path = write_config(root, sources, data_dir=root / "data")
    _add_keys(path, index_uri=writer.index_uri)
    return path


@pytest.mark.shared_data
def test_writer_keeps_tables_off_the_local_disk(remote: RaglineConfig, moto_server: S3Server):
    keys = [
        o["Key"]
        for o in moto_server.client().list_objects_v2(Bucket="ragline-test", Prefix="index/")[  # type: ignore[attr-defined]
            "Contents"
        ]
    ]
    assert any(k.startswith("index/index_manifest.lance/") for k in keys)
    assert any(k.startswith("index/chunks_") for k in keys)
    assert not (remote.data_dir / "lancedb").exists()
    assert not (remote.data_dir / "index.json").exists()


@pytest.mark.shared_data
def test_search_host_with_empty_data_dir_serves_the_same_hits(
    remote: RaglineConfig, moto_server: S3Server, tmp_path: Path
) -> None:
    from rag_serving.search import SearchEngine

    query = "tables spreadsheet"
    expected = SearchEngine(remote).search(query, k=5).as_json()["hits"]
    assert expected, "the writer finds nothing: the test would prove nothing"
    config = _search_host_config(remote, tmp_path)
    # This host's replicas of generations the manifest no longer names: one unused for
    # an hour (removed), one touched a moment ago (kept: a process may serve it still).
    replicas = tmp_path / "data" / "search-fulltext"
    dropped, recent = replicas / "0dd0dd0dd0dd0dd0", replicas / "1ee1ee1ee1ee1ee1"
    for folder in (dropped, recent):
        folder.mkdir(parents=True)
        (folder / "replica.json").write_text('{"table": "chunks_old", "version": 3, "rows": 9}')
    hour_ago = time.time() - 3600
    os.utime(dropped / "replica.json", (hour_ago, hour_ago))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragline.cli",
            "--config",
            str(config),
            "search",
            query,
            "--k",
            "5",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=subprocess_env(moto_server),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)["hits"]
    assert [(h["chunk_id"], h["rank"]) for h in hits] == [
        (h["chunk_id"], h["rank"]) for h in expected
    ]
    # The notes are not on this host: nobody can tell whether they changed.
    assert {h["stale_reason"] for h in hits} == {"unchecked"}
    assert not dropped.exists() and recent.is_dir()
    assert len([f for f in replicas.iterdir() if f.is_dir()]) == 2  # recent + the active one
    assert not (tmp_path / "data" / "lancedb").exists()
    # The host made its ONNX query encoder, as indexing does: later queries skip PyTorch.
    assert list((tmp_path / "data" / "models").glob("*/*.onnx"))


@pytest.mark.shared_data
def test_a_write_reaches_a_running_search_host_within_seconds(
    remote: RaglineConfig, moto_server: S3Server, tmp_path: Path
) -> None:
    config = _search_host_config(remote, tmp_path)
    log = tmp_path / "search-host.log"
    host = subprocess.Popen(
        [sys.executable, "-c", SEARCH_HOST, str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log.open("wb"),
        text=True,
        cwd=REPO,
        env=subprocess_env(moto_server),
    )
    assert host.stdin is not None and host.stdout is not None

    def ask(query: str) -> list[dict]:
        host.stdin.write(query + "\n")  # type: ignore[union-attr]
        host.stdin.flush()  # type: ignore[union-attr]
        return json.loads(host.stdout.readline())["hits"]  # type: ignore[union-attr]

    note = Path(remote.source("hub").path) / "calendar.md"
    original = note.read_text(encoding="utf-8")
    try:
        assert host.stdout.readline().strip() == "ready", log.read_text()
        assert ask(NEW_WORD) == []
        note.write_text(original + f"\n\n## Harbour\n\nThe {NEW_WORD} schedule.\n", "utf-8")
        build_index(remote.config_path)  # type: ignore[arg-type]
        written = time.monotonic()
        deadline = written + 20
        hits: list[dict] = []
        while time.monotonic() < deadline and not hits:
            hits = ask(NEW_WORD)
            if not hits:
                time.sleep(0.2)
        assert [h["path"] for h in hits] == ["calendar.md"], "the write never became visible"
        logging.getLogger(__name__).info("visible after %.1f s", time.monotonic() - written)
        # Undone: the host's own full-text index drops the chunk again.
        note.write_text(original, encoding="utf-8")
        build_index(remote.config_path)  # type: ignore[arg-type]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and hits:
            hits = ask(NEW_WORD)
            if hits:
                time.sleep(0.2)
        assert hits == [], "the removed chunk is still served"
    finally:
        if note.read_text(encoding="utf-8") != original:
            note.write_text(original, encoding="utf-8")
            build_index(remote.config_path)  # type: ignore[arg-type]
        host.stdin.close()
        host.wait(timeout=30)


@pytest.mark.shared_data
def test_status_on_a_search_host_reads_the_shared_tables(
    remote: RaglineConfig, tmp_path: Path
) -> None:
    from rag_serving.status import index_status

    status = index_status(parse_config_file(_search_host_config(remote, tmp_path)), False)
    hub = {s.name: s for s in status.sources}["hub"]
    assert hub.documents == len(NOTES) and hub.chunks > 0 and hub.last_indexed_at
    assert status.embedder is not None
    assert not (tmp_path / "data" / "lancedb").exists()


@pytest.mark.shared_data
def test_racing_manifest_writers_exactly_one_wins(
    remote: RaglineConfig, moto_server: S3Server
) -> None:
    from dataclasses import replace

    from rag_serving.index.layout import IndexLayout
    from rag_serving.index.manifest import read_manifest, update_manifest, write_manifest

    path = IndexLayout(remote.data_dir, remote.index_uri).manifest_path
    read = read_manifest(path)
    outcomes: list[object] = []
    start = threading.Barrier(4)

    def write(n: int) -> None:
        start.wait()
        try:
            outcomes.append(write_manifest(path, replace(read, updated_at=f"writer {n}")))
        except ManifestConflictError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [o for o in outcomes if not isinstance(o, Exception)]
    lost = [o for o in outcomes if isinstance(o, ManifestConflictError)]
    assert len(won) == 1 and len(lost) == 3
    assert "changed by another writer" in str(lost[0])
    stored = read_manifest(path)
    assert stored.updated_at == won[0].updated_at  # type: ignore[attr-defined]
    assert stored.revision == read.revision + 1  # type: ignore[operator]
    # A loser that reads again and retries gets through.
    again = update_manifest(path, lambda m: replace(m, updated_at="the loser, again"))
    assert read_manifest(path).updated_at == "the loser, again" == again.updated_at


def test_a_store_ignoring_conditional_writes_is_refused(
    moto_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    from rag_serving.index.store import IndexStore

    moto_server.bucket("ragline-unsafe")
    with ConditionIgnoringProxy(moto_server.endpoint) as standin:
        for name, value in standin.env().items():
            monkeypatch.setenv(name, value)
        path = write_config(tmp_path, [])
        _add_keys(path, index_uri="s3://ragline-unsafe/index")
        config = parse_config_file(path)
        with pytest.raises(ObjectStoreError) as refused:
            IndexStore.of(config)
        message = str(refused.value)
        assert "\n" not in message
        assert "s3://ragline-unsafe/index" in message and "ignores conditional writes" in message
        assert "s3+ddb://ragline-unsafe/index?ddbTableName=" in message
        assert "allow_unsafe_concurrent_writes = true" in message
        IndexStore.of(config, read_only=True)  # reading is safe: not refused
        _add_keys(path, allow_unsafe_concurrent_writes=True)
        with caplog.at_level(logging.WARNING):
            store = IndexStore.of(parse_config_file(path))
        assert store.table_names() == []
        assert any("ignores conditional writes" in r.getMessage() for r in caplog.records)


def test_s3_ddb_commits_through_dynamodb_on_that_store(
    s3_env: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fix the refusal names: with the DynamoDB commit store the same store is used
    for writing (no probe), and each commit is recorded in DynamoDB."""
    import boto3

    from rag_serving.index.store import IndexStore

    s3_env.bucket("ragline-ddb")
    dynamodb = boto3.client("dynamodb", endpoint_url=s3_env.endpoint, region_name="us-east-1")
    dynamodb.create_table(
        TableName="ragline-commits",
        KeySchema=[
            {"AttributeName": "base_uri", "KeyType": "HASH"},
            {"AttributeName": "version", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "base_uri", "AttributeType": "S"},
            {"AttributeName": "version", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    with ConditionIgnoringProxy(s3_env.endpoint) as standin:
        for name, value in standin.env().items():
            monkeypatch.setenv(name, value)
        path = write_config(tmp_path, [])
        _add_keys(path, index_uri="s3+ddb://ragline-ddb/index?ddbTableName=ragline-commits")
        store = IndexStore.of(parse_config_file(path))
        store.files()
        assert store.table_names() == ["files"]
    assert dynamodb.scan(TableName="ragline-commits")["Count"] >= 1


def test_moto_honours_conditional_writes(moto_server: S3Server, monkeypatch) -> None:
    from rag_serving.index.location import honours_conditional_writes

    for name, value in moto_server.env().items():
        monkeypatch.setenv(name, value)
    moto_server.bucket("ragline-probe")
    assert honours_conditional_writes("s3://ragline-probe/index")
    left = moto_server.client().list_objects_v2(Bucket="ragline-probe")  # type: ignore[attr-defined]
    assert left["KeyCount"] == 0  # the probe cleans up after itself


def test_bad_index_uri_is_one_clear_line(tmp_path: Path) -> None:
    from rag_sources.errors import ConfigError

    for uri, hint in [
        ("ftp://host/x", "unsupported scheme 'ftp'"),
        ("s3://bucket", "no prefix after the bucket"),
        ("s3+ddb://bucket/index", "?ddbTableName=TABLE"),
    ]:
        path = write_config(tmp_path, [])
        _add_keys(path, index_uri=uri)
        with pytest.raises(ConfigError) as error:
            parse_config_file(path)
        assert uri in str(error.value) and hint in str(error.value)


def test_state_every_host_needs_lives_beside_the_tables(s3_env: S3Server, tmp_path: Path) -> None:
    """Deferred markers (written by a run, read by the sensor, maybe on another host)
    and feed archives (entries a feed no longer carries) are objects beside the
    tables; a mailbox's offsets cache stays on the host."""
    from rag_assets.sources import source_kind
    from rag_serving.index.layout import IndexLayout
    from rag_sources.kinds.feeds import archive
    from rag_sources.kinds.feeds.config import FeedsSourceConfig
    from rag_sources.kinds.mail.config import MailSourceConfig

    s3_env.bucket("ragline-state")
    uri = "s3://ragline-state/index"
    client = s3_env.client()

    def keys() -> list[str]:
        listed = client.list_objects_v2(Bucket="ragline-state")  # type: ignore[attr-defined]
        return sorted(o["Key"] for o in listed.get("Contents", []))

    marker = IndexLayout(tmp_path, uri).deferred_marker("notes")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("3\n", encoding="utf-8")
    assert keys() == ["index/_ragline/deferred/notes"]
    first = marker.stat().st_mtime_ns
    marker.write_text("2\n", encoding="utf-8")
    assert marker.stat().st_mtime_ns != first  # the sensor sees a rewrite as new
    marker.unlink(missing_ok=True)
    assert keys() == [] and not marker.exists()

    feeds = FeedsSourceConfig(name="news", kind="feeds", path=tmp_path, urls=["https://x.test/f"])
    kind = source_kind(feeds, tmp_path, uri)
    spec = archive.configured_feeds(feeds)[0]
    state = archive.FeedState(url=spec.url, title="X", entries={"e1": {"hash": "h"}})
    archive.save_state(kind.state_dir, state)
    assert keys() == [f"index/_ragline/sources/news/feeds/{spec.feed_id}.json"]
    assert archive.load_state(kind.state_dir, spec) == state
    assert not (tmp_path / "sources").exists()

    mbox = tmp_path / "inbox.mbox"
    mbox.write_text("", encoding="utf-8")
    mail = MailSourceConfig(name="mail", kind="mail", path=mbox)
    assert source_kind(mail, tmp_path, uri).state_dir == tmp_path / "sources" / "mail"
