"""Hostile feeds (issue 26): redirects into this machine, OPML entries naming local
files, stacked gzip, a JSON Feed nested 100,000 deep, a server that sends more than
its Content-Length, huge headers, endless and dripping bodies, and server paths in
messages. Real servers on this machine's addresses; nothing is stood in for."""

from __future__ import annotations

import gzip
import json
import ssl
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpcore
import pytest

from rag_sources.errors import SourceUnavailableError
from rag_sources.kinds.feeds import archive
from rag_sources.kinds.feeds.archive import FeedSpec, FeedState, list_archived_entries
from rag_sources.kinds.feeds.config import FeedsSourceConfig
from rag_sources.kinds.feeds.fetch import FetchError, fetch_feed
from rag_sources.kinds.feeds.opml import read_opml
from rag_sources.kinds.feeds.parse import Entry, parse_feed
from rag_sources.kinds.feeds.poll import refresh_feeds
from rag_sources.net import fetch as fetch_module
from rag_sources.net.fetch import REASON_CHARS
from rag_sources.net.network import (
    LOCAL,
    PRIVATE,
    PUBLIC,
    AddressRefused,
    GuardedBackend,
    address_reach,
)
from tests.feed_server import FeedServer, lan_address, rss, zeros_gzip

GOOD = rss("Good", "Zebras cross the river", "Volcano wakes")


@pytest.fixture(scope="module")
def server():
    with FeedServer() as running:
        yield running


@pytest.fixture(scope="module")
def lan():
    """A server on this machine's network address: a feed on another host, as far as
    the address checks can tell (a private-network address, not loopback)."""
    with FeedServer(host=lan_address()) as running:
        yield running


def feeds_config(*urls: str, **settings) -> FeedsSourceConfig:
    return FeedsSourceConfig(name="n", kind="feeds", urls=list(urls), **settings)


# ---- item 2: redirects and addresses ----------------------------------------------


def test_addresses_are_ranked_public_private_and_local() -> None:
    for address in ("8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"):
        assert address_reach(address) == PUBLIC, address
    for address in ("10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fd00::1"):
        assert address_reach(address) == PRIVATE, address
    for address in (
        "127.0.0.1", "127.8.9.10", "::1", "169.254.169.254", "fe80::1", "0.0.0.0", "::",
        "::ffff:127.0.0.1", "224.0.0.1", "240.0.0.1",
    ):  # fmt: skip
        assert address_reach(address) == LOCAL, address


def test_a_connection_is_checked_when_it_is_opened(server: FeedServer) -> None:
    """The backend every fetch connects through: a fetch whose feed is public may not
    connect to loopback, by address or by a name that resolves there (DNS rebinding:
    the check is on the address connected to, not on an earlier answer)."""
    port = server.httpd.server_address[1]
    deadline = time.monotonic() + 5
    for host in ("127.0.0.1", "localhost"):
        for allowed in (PUBLIC, PRIVATE):
            with pytest.raises(AddressRefused, match="loopback"):
                GuardedBackend(allowed, deadline).connect_tcp(host, port, timeout=2)
    stream = GuardedBackend(LOCAL, deadline).connect_tcp("localhost", port, timeout=2)
    stream.close()


def test_a_feed_elsewhere_may_not_redirect_into_this_machine(
    server: FeedServer, lan: FeedServer
) -> None:
    server.put("/secret.xml", rss("Secret", "the admin console's token"))
    port = server.httpd.server_address[1]
    for name, target in (
        ("/to-loopback.xml", server.url("/secret.xml")),
        ("/to-localhost.xml", f"http://localhost:{port}/secret.xml"),
    ):
        lan.redirects[name] = target
        with pytest.raises(FetchError, match="refused to connect to") as refused:
            fetch_feed(lan.url(name), timeout=3)
        message = str(refused.value)
        assert message.startswith(lan.url(name)) and "loopback" in message
        assert "private-network address" in message and "\n" not in message
    assert server.requests_for("/secret.xml") == []  # never reached
    # within its own network a feed may move, and a feed on this machine anywhere
    lan.put("/moved.xml", GOOD)
    lan.redirects["/old.xml"] = "/moved.xml"
    assert b"Zebras" in (fetch_feed(lan.url("/old.xml"), timeout=3).content or b"")
    server.redirects["/to-lan.xml"] = lan.url("/moved.xml")
    assert b"Zebras" in (fetch_feed(server.url("/to-lan.xml"), timeout=3).content or b"")
    server.redirects["/to-file.xml"] = "file:///etc/passwd"
    with pytest.raises(FetchError, match="redirected to a file address"):
        fetch_feed(server.url("/to-file.xml"), timeout=3)


def test_credentials_in_a_feed_url_go_to_its_own_host_only(
    server: FeedServer, lan: FeedServer
) -> None:
    lan.put("/private-moved.xml", GOOD)
    server.redirects["/private.xml"] = lan.url("/private-moved.xml")
    host, port = server.httpd.server_address[:2]
    fetched = fetch_feed(f"http://reader:s3cret@{host}:{port}/private.xml", timeout=3)
    assert fetched.content == GOOD
    [asked] = server.requests_for("/private.xml")
    assert asked.headers["Authorization"] == "Basic cmVhZGVyOnMzY3JldA=="
    [moved] = lan.requests_for("/private-moved.xml")
    assert "Authorization" not in moved.headers


def test_an_opml_file_may_name_web_feeds_only(tmp_path: Path, server: FeedServer) -> None:
    """An OPML entry naming a local file (file://, an absolute or a relative path)
    is refused and listed with the reason; the file is never read and no message
    names a path of this machine. Local feed files are read through urls only."""
    local = tmp_path / "private" / "notes.xml"
    local.parent.mkdir()
    local.write_bytes(rss("Private notes", "my bank PIN is 1234"))
    server.put("/web.xml", GOOD)
    opml = tmp_path / "subs.opml"
    opml.write_text(
        f"""<opml version="2.0"><body>
        <outline text="Web" xmlUrl="{server.url("/web.xml")}"/>
        <outline text="File URL" xmlUrl="{local.as_uri()}"/>
        <outline text="Absolute" xmlUrl="{local}"/>
        <outline text="Relative" xmlUrl="private/notes.xml"/>
        <outline xmlUrl="../../etc/passwd"/>
        <outline text="FTP" xmlUrl="ftp://example.org/feed.xml"/>
        </body></opml>"""
    )
    config = FeedsSourceConfig(name="n", kind="feeds", opml=opml)
    state = tmp_path / "state"
    report = refresh_feeds(config, state)
    assert [o.status for o in report.outcomes] == ["fetched"] + ["refused"] * 5
    items = list(list_archived_entries(config, state))
    entries = [i for i in items if not i.problem]
    refused = [i for i in items if i.problem]
    assert len(entries) == 2  # the web feed's
    assert len(refused) == 5 and all(i.severity == "skipped" for i in refused)
    for item in refused:
        assert item.problem.startswith("subs.opml: ") and str(tmp_path) not in item.problem
    assert "the feed 'File URL' is a local file" in refused[0].problem
    assert "give a local feed file in urls" in refused[0].problem
    assert "a feed is a local file" in refused[3].problem  # an outline without a title
    assert "has a 'ftp' address" in refused[4].problem
    stored = " ".join(p.read_text() for p in (state / archive.FEEDS_FOLDER).glob("*.json"))
    assert "PIN" not in stored  # the local file was never read
    # through urls the same file is a feed (the user's own choice)
    assert b"PIN" in (fetch_feed(str(local)).content or b"")


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for ``localhost`` only (not 127.0.0.1) and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_https_is_verified_against_the_name_not_the_address_connected_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections go to the checked address, yet TLS still checks the URL's name."""
    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trust it, as a system CA would be
    fetch_module._ssl_context.cache_clear()
    try:
        with FeedServer(tls=context) as secure:
            secure.put("/tls.xml", GOOD)
            port = secure.httpd.server_address[1]
            fetched = fetch_feed(f"https://localhost:{port}/tls.xml", timeout=3)
            assert fetched.content == GOOD
            with pytest.raises(FetchError, match=r"CERTIFICATE_VERIFY_FAILED|IP address mismatch"):
                fetch_feed(f"https://127.0.0.1:{port}/tls.xml", timeout=3)
    finally:
        monkeypatch.undo()
        fetch_module._ssl_context.cache_clear()


# ---- item 3: no server paths in messages -------------------------------------------


def test_messages_name_files_not_server_paths(tmp_path: Path, server: FeedServer) -> None:
    folder = tmp_path / "deep" / "inside"
    folder.mkdir(parents=True)
    with pytest.raises(FetchError) as missing:
        fetch_feed(str(folder / "gone.xml"))
    assert str(missing.value) == "gone.xml: no such feed file; check the path"
    broken = folder / "broken.xml"
    broken.write_bytes(b"<rss><channel><title>no</title>")
    config = feeds_config(str(broken), str(folder / "gone.xml"), server.url("/nope.xml"))
    state = tmp_path / "state"
    refresh_feeds(config, state)
    problems = [i.problem for i in list_archived_entries(config, state) if i.problem]
    assert len(problems) == 3
    assert problems[0].startswith("broken.xml: malformed feed") or problems[0].startswith(
        "broken.xml: not an RSS"
    )
    assert problems[1].startswith("gone.xml: no such feed file")
    # a corrupt archive file is named inside the state folder
    fid = archive.feed_id(str(broken))
    archive.archive_path(state, fid).write_text("{not json")
    [corrupt] = [i for i in list_archived_entries(config, state) if i.key == f"{fid}/"]
    assert f"the feed archive feeds/{fid}.json cannot be read" in corrupt.problem
    for problem in [*problems, corrupt.problem]:
        assert str(tmp_path) not in problem, problem
    opml = folder / "subs.opml"
    opml.write_text("<opml><body><outline")
    with pytest.raises(SourceUnavailableError) as bad:
        read_opml(opml)
    assert str(bad.value).startswith("subs.opml: not a valid OPML file")
    assert str(tmp_path) not in str(bad.value)


def test_a_local_feed_that_is_not_a_file_is_refused_unread() -> None:
    started = time.perf_counter()
    with pytest.raises(FetchError, match="zero: not a regular file"):
        fetch_feed("/dev/zero", max_bytes=1000)
    assert time.perf_counter() - started < 1


# ---- item 5: compression --------------------------------------------------------------


def test_stacked_or_unasked_compression_is_refused_and_gzip_is_capped_decoded(
    server: FeedServer,
) -> None:
    bomb = zeros_gzip(1 << 28, 9)  # 256 MiB of zeros in 255 kB
    stacked = gzip.compress(bomb)  # under 1 kB: "gzip, gzip" unpacks to 256 MiB
    assert len(stacked) < 1_000
    url = server.route("/stacked.xml", stacked, {"Content-Encoding": "gzip, gzip"})
    started = time.perf_counter()
    with pytest.raises(FetchError, match=r"compressed 2 times over .*refused"):
        fetch_feed(url)
    url = server.route("/bomb.xml", bomb, {"Content-Encoding": "gzip"})
    with pytest.raises(FetchError, match="larger than max_feed_bytes = 1,000,000 once decompress"):
        fetch_feed(url, max_bytes=1_000_000)
    assert time.perf_counter() - started < 5
    url = server.route("/brotli.xml", b"\x1b\x00", {"Content-Encoding": "br"})
    with pytest.raises(FetchError, match="compressed with 'br', which was not asked for"):
        fetch_feed(url)
    url = server.route("/cut.xml", gzip.compress(GOOD)[:-12], {"Content-Encoding": "gzip"})
    with pytest.raises(FetchError, match="cannot be decompressed"):
        fetch_feed(url)
    url = server.route("/gzipped.xml", gzip.compress(GOOD), {"Content-Encoding": "gzip"})
    fetched = fetch_feed(url)
    assert fetched.content == GOOD and "content-encoding" not in fetched.headers
    assert len(parse_feed(fetched.content, fetched.headers, url).entries) == 2
    [request] = server.requests_for("/gzipped.xml")
    assert request.headers["Accept-Encoding"] == "gzip"


# ---- item 7: nesting -------------------------------------------------------------------


def test_a_json_feed_nested_100000_deep_is_that_feeds_problem_only(
    tmp_path: Path, server: FeedServer
) -> None:
    deep = b'{"version":"https://jsonfeed.org/version/1.1","items":' + b"[" * 100_000
    server.put("/deep.json", deep + b"]" * 100_000 + b"}", "application/feed+json")
    server.put("/good.xml", GOOD)
    good_json = {
        "version": "https://jsonfeed.org/version/1.1", "title": "J",
        "items": [{"id": "1", "content_text": "Glacier retreat measured"}],
    }  # fmt: skip
    server.put("/good.json", json.dumps(good_json).encode(), "application/feed+json")
    config = feeds_config(
        server.url("/deep.json"), server.url("/good.xml"), server.url("/good.json")
    )
    report = refresh_feeds(config, tmp_path)
    assert [o.status for o in report.outcomes] == ["error", "fetched", "fetched"]
    assert "nested deeper than max_nesting_depth = 256" in (report.outcomes[0].message or "")
    assert sum(not i.problem for i in list_archived_entries(config, tmp_path)) == 3
    # the cap is the source's [limits] one
    nested = {**good_json, "items": [{"id": "2", "_x": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}]}
    server.put("/nested.json", json.dumps(nested).encode(), "application/feed+json")
    strict = feeds_config(server.url("/nested.json"), limits={"max_nesting_depth": 16})
    [outcome] = refresh_feeds(strict, tmp_path / "strict").outcomes
    assert outcome.status == "error" and "max_nesting_depth = 16" in (outcome.message or "")
    # a cap set above what the parser can recurse: still that feed's problem
    lax = parse_feed(deep + b"]" * 100_000 + b"}", {}, "u", max_depth=1_000_000)
    assert lax.problem and lax.problem.startswith("u: not valid JSON")


def test_an_opml_file_nested_100000_deep_is_a_one_line_error(tmp_path: Path) -> None:
    def nested(depth: int) -> bytes:
        return (
            b"<opml><body>" + b"<outline text='f'>" * depth
            + b"<outline xmlUrl='https://a.example/rss'/>" + b"</outline>" * depth
            + b"</body></opml>"
        )  # fmt: skip

    opml = tmp_path / "deep.opml"
    opml.write_bytes(nested(100_000))
    with pytest.raises(SourceUnavailableError, match="nested deeper than max_nesting_depth = 256"):
        read_opml(opml)
    opml.write_bytes(nested(300))
    [feed] = read_opml(opml, max_depth=400)
    assert feed.url == "https://a.example/rss" and feed.categories == ("/".join(["f"] * 300),)


# ---- item 13 and the protocol ------------------------------------------------------------


def test_a_server_sending_more_than_its_content_length_poisons_nothing(
    tmp_path: Path, server: FeedServer
) -> None:
    """Its extra bytes stay on its own connection: the next feed on the same server
    gets a connection of its own and is read whole."""
    leak = b"HTTP/1.1 200 OK\r\nX-Secret: " + b"s" * 600 + b"\r\n\r\n"
    server.route(
        "/liar.xml", b"",
        raw=b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\nContent-Length: "
        + str(len(GOOD)).encode() + b"\r\n\r\n" + GOOD + leak,
    )  # fmt: skip
    server.put("/next.xml", rss("Next", "Glacier retreat measured"))
    config = feeds_config(server.url("/liar.xml"), server.url("/next.xml"))
    report = refresh_feeds(config, tmp_path)
    assert [(o.status, o.message) for o in report.outcomes] == [
        ("fetched", None),
        ("fetched", None),
    ]
    assert sum(not i.problem for i in list_archived_entries(config, tmp_path)) == 3


def test_broken_protocol_huge_headers_endless_and_dripping_bodies_are_bounded(
    server: FeedServer,
) -> None:
    garbage = server.route(
        "/garbage.xml", b"", raw=b"XTTP/9 200 " + b"<secret>" * 200 + b"\r\n\r\n"
    )
    with pytest.raises(FetchError, match=r"broke the HTTP protocol \([\"']") as broke:
        fetch_feed(garbage, timeout=2)
    assert len(str(broke.value)) < 180 + REASON_CHARS + len(garbage)
    huge = server.route("/huge.xml", GOOD, {"X-Filler": "x" * 300_000})
    with pytest.raises(FetchError, match="broke the HTTP protocol"):
        fetch_feed(huge, timeout=2)

    def endless(out) -> None:
        out.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        while True:
            out.write(chunk)

    def drip(out) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\n" * 100:
            out.write(bytes([byte]))
            out.flush()
            time.sleep(0.05)

    def redirect_with_endless_body(out) -> None:
        out.write(
            b"HTTP/1.1 302 Found\r\nLocation: /good-end.xml\r\nContent-Length: 10000000000\r\n\r\n"
        )
        while True:
            out.write(b"x" * 65536)

    server.put("/good-end.xml", GOOD)
    started = time.perf_counter()
    with pytest.raises(FetchError, match="larger than max_feed_bytes = 5,000,000"):
        fetch_feed(server.route("/endless.xml", b"", raw=endless), max_bytes=5_000_000)
    assert time.perf_counter() - started < 5
    started = time.perf_counter()
    with pytest.raises(FetchError, match=r"took longer than 1\.2 s to download"):
        fetch_feed(server.route("/drip.xml", b"", raw=drip), timeout=0.3)
    assert time.perf_counter() - started < 2.5  # each byte came within the read timeout
    fetched = fetch_feed(server.route("/redir.xml", b"", raw=redirect_with_endless_body))
    assert fetched.content == GOOD  # the redirect's body was never read


def test_a_server_reason_phrase_is_not_stored(server: FeedServer) -> None:
    url = server.route(
        "/teapot.xml",
        b"",
        raw=b"HTTP/1.1 404 " + b"<script>" * 2000 + b"\r\nContent-Length: 0\r\n\r\n",
    )
    with pytest.raises(FetchError) as missing:
        fetch_feed(url)
    assert (
        str(missing.value) == f"{url}: HTTP 404 Not Found; check the URL (the feed may have moved)"
    )


def test_the_deadline_covers_connecting_too() -> None:
    with pytest.raises(httpcore.ConnectTimeout):
        GuardedBackend(LOCAL, time.monotonic() - 1).connect_tcp("127.0.0.1", 9, timeout=1)


def test_an_entry_of_html_nested_100000_deep_is_indexed_as_text_with_a_warning() -> None:
    from rag_sources.formats.model import options_for
    from rag_sources.kinds.feeds.kind import entry_document
    from rag_sources.limits import Limits

    html = "<div>" * 100_000 + "Glacier retreat measured" + "</div>" * 100_000
    state = FeedState(url="https://example.org/feed")
    entry = Entry(guid="deep", title="Deep", content=html)
    state.merge([entry], datetime.now(UTC))
    spec = FeedSpec(state.url, 60)
    started = time.perf_counter()
    document = entry_document(
        spec, state, archive.entry_id(entry), entry, options_for(Limits(max_nesting_depth=64))
    )
    assert time.perf_counter() - started < 10
    assert "Glacier retreat measured" in document.body
    assert any("64" in warning for warning in document.warnings), document.warnings
