"""Issue 27, items 2, 5 and 9 (first half): text read in the charset it really is in
(HTML pages, EPUB chapters, mail parts and headers, feeds), EPUB sections anchored by
the book's table of contents, and feeds named by a web page found through the page's
``<link rel="alternate">``. Real files: pages and mail built here in the charsets
they declare, the 13 EPUBs and the feeds of ../shared/data, a real HTTP server."""

from __future__ import annotations

import base64
import functools
import posixpath
import shutil
import zipfile
from pathlib import Path

import pytest
from lxml import etree

from rag_serving.config import RaglineConfig
from rag_serving.search.engine import SearchEngine
from rag_sources.charsets import codec_for, decode_declared
from rag_sources.formats.model import ParsedDocument, ParseOptions
from rag_sources.formats.router import parse_file
from rag_sources.kinds.feeds import archive
from rag_sources.kinds.feeds.archive import list_archived_entries
from rag_sources.kinds.feeds.config import FeedsSourceConfig
from rag_sources.kinds.feeds.fetch import fetch_feed
from rag_sources.kinds.feeds.parse import Feed, parse_feed
from rag_sources.kinds.feeds.poll import refresh_feeds
from rag_sources.kinds.mail.message import read_message
from tests.conftest import SHARED_DATA, build_index, write_config
from tests.feed_server import FeedServer, lan_address, rss

QQ_TITLE = "腾讯网 - 中国领先的综合门户网站"
QQ_HEADING = "朱镕基谈经济改革：稳中求进"
QQ_BODY = "新闻标题：北京天气晴朗，市民纷纷外出踏青。据报道，今年春季气温偏高。"


def parse_html_file(path: Path) -> ParsedDocument:
    return parse_file(path, path.name, "html", ParseOptions())


def replacement_share(text: str) -> float:
    return text.count("\ufffd") / max(len(text), 1)


def qq_page(charset: str) -> str:
    """A page like readability's qq/source.html: Chinese text, declared ``charset``."""
    return (
        "<!DOCTYPE html><html><head>"
        f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">'
        f"<title>{QQ_TITLE}</title></head><body><div id='main'>"
        f"<h1>{QQ_HEADING}</h1><p>{QQ_BODY}</p><p>{QQ_BODY[::-1]}</p></div></body></html>"
    )


# ---- item 2: charsets ------------------------------------------------------------------


def test_a_utf8_page_declaring_gb2312_is_read_as_utf8_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "qq.html"
    path.write_bytes(qq_page("gb2312").encode("utf-8"))
    doc = parse_html_file(path)
    assert doc.title == QQ_TITLE
    assert doc.body.startswith(f"# {QQ_HEADING}\n\n{QQ_BODY}\n")
    assert replacement_share(doc.body) == 0
    assert doc.warnings == ("the page declares charset 'gb2312' but is UTF-8; read as UTF-8",)


def test_a_gbk_page_declaring_gb2312_is_read_as_gb18030(tmp_path: Path) -> None:
    """Browsers read gb2312 as GBK/GB18030: 镕 (in the heading) is GBK, not GB2312,
    and Python's strict gb2312 codec refuses it."""
    with pytest.raises(UnicodeEncodeError):
        QQ_HEADING.encode("gb2312")
    path = tmp_path / "gbk.html"
    path.write_bytes(qq_page("gb2312").encode("gbk"))
    doc = parse_html_file(path)
    assert doc.title == QQ_TITLE and QQ_HEADING in doc.body and QQ_BODY in doc.body
    assert doc.warnings == ()


def test_a_utf8_page_declaring_latin1_is_not_mojibake(tmp_path: Path) -> None:
    """windows-1252 reads any bytes, so nothing fails: the UTF-8 bytes themselves say
    what the page is (a Latin-1 "é" is never valid UTF-8)."""
    text = "Crème brûlée, naïve café — “quoted”"
    path = tmp_path / "stale.html"
    path.write_bytes(
        f'<html><head><meta charset="iso-8859-1"></head><body><p>{text}</p></body></html>'.encode()
    )
    doc = parse_html_file(path)
    assert doc.body == text + "\n"
    assert doc.warnings == ("the page declares charset 'iso-8859-1' but is UTF-8; read as UTF-8",)
    # The same words really in windows-1252 (declared as iso-8859-1) read as declared.
    legacy = tmp_path / "legacy.html"
    legacy.write_bytes(
        f'<html><head><meta charset="iso-8859-1"></head><body><p>{text}</p></body></html>'.encode(
            "cp1252"
        )
    )
    assert parse_html_file(legacy).body == text + "\n"
    assert parse_html_file(legacy).warnings == ()


def test_bytes_neither_the_declared_charset_nor_utf8_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "bad.html"
    body = "日本語のページ".encode("shift_jis") + b"\x81 \x82\x7f"
    path.write_bytes(b'<meta charset="shift_jis"><p>' + body + b"</p>")
    doc = parse_html_file(path)
    assert doc.body.startswith("日本語のページ")
    [warning] = doc.warnings
    assert warning.startswith("the page is not valid shift_jis (its declared charset); ")
    assert warning.endswith("unreadable byte sequences replaced") and doc.body.count("\ufffd") > 1


def test_whatwg_labels_and_non_charsets() -> None:
    assert codec_for("GB2312") == codec_for("gbk") == "gb18030"
    assert codec_for("ISO-8859-1") == codec_for("us-ascii") == "cp1252"
    assert codec_for("ks_c_5601-1987") == "cp949" and codec_for("Shift_JIS") == "cp932"
    assert codec_for("latin2") == "iso8859-2" and codec_for('"utf-8"') == "utf-8"
    for label in ("base64", "rot13", "zlib", "unicode_escape", "nonsense", "", None):
        assert codec_for(label) is None, label
    # a short Chinese text whose GBK bytes happen to be valid UTF-8 stays GBK: a
    # multi-byte charset that reads the bytes is believed below 8 non-ASCII bytes
    lucky = "一".encode("gbk")  # D2 BB: "һ" in UTF-8
    assert lucky.decode("utf-8") and decode_declared(lucky, "gb2312").text == "一"


# ---- item 2: the same rule for mail parts and headers ---------------------------------


def b64(text: str, charset: str) -> str:
    return base64.b64encode(text.encode(charset)).decode()


def mail(headers: str, body: bytes, content_type: str, encoding: str = "8bit") -> bytes:
    """A message as a mail client writes it, with the labels given (right or stale)."""
    head = (
        "From: =?iso-8859-1?Q?Ren=C3=A9e_Fran=C3=A7ois?= <renee@example.org>\r\n"
        "To: =?gb2312?B?" + b64("朱镕基", "gbk") + "?= <zhu@example.cn>\r\n"
        "Message-ID: <charset-test@example.org>\r\n"
        "Date: Tue, 02 Apr 2024 10:00:00 +0000\r\n"
        f"{headers}MIME-Version: 1.0\r\nContent-Type: {content_type}\r\n"
        f"Content-Transfer-Encoding: {encoding}\r\n\r\n"
    )
    return head.encode("ascii") + body


def test_mail_parts_and_headers_follow_the_same_charset_rule() -> None:
    text = "Crème brûlée — “on Tuesday”, 朱镕基"
    # a UTF-8 body labelled iso-8859-1 (a client that re-sent a draft): UTF-8, said so
    record, _ = read_message(
        mail("Subject: plain\r\n", text.encode(), 'text/plain; charset="iso-8859-1"')
    )
    assert record.text.strip() == text
    assert record.warnings == [
        "the text part declares charset 'iso-8859-1' but is UTF-8; read as UTF-8"
    ]
    # display names: a UTF-8 name labelled iso-8859-1, a GBK name labelled gb2312
    assert record.sender is not None and record.sender.name == "Renée François"
    assert [a.name for a in record.to] == ["朱镕基"]
    # a GBK body labelled gb2312 (base64), a subject in GBK split across two words
    # in the middle of a character
    raw = "镕基访问北京".encode("gbk")
    subject = (
        "Subject: Re: =?gb2312?B?"
        + base64.b64encode(raw[:3]).decode()
        + "?=\r\n =?gb2312?B?"
        + base64.b64encode(raw[3:]).decode()
        + "?=\r\n"
    )
    record, _ = read_message(
        mail(
            subject,
            base64.b64encode("朱镕基访问北京".encode("gbk")),
            "text/plain; charset=gb2312",
            "base64",
        )
    )
    assert record.subject == "Re: 镕基访问北京"
    assert record.text.strip() == "朱镕基访问北京" and record.warnings == []
    # no charset at all (MIME says us-ascii): UTF-8 when it is, else windows-1252
    record, _ = read_message(mail("Subject: x\r\n", text.encode(), "text/plain"))
    assert record.text.strip() == text and record.warnings == []
    record, _ = read_message(mail("Subject: x\r\n", "Café “quoted”".encode("cp1252"), "text/plain"))
    assert record.text.strip() == "Café “quoted”"
    # an HTML part that names its charset only in <meta>
    page = '<html><head><meta charset="gb2312"></head><body><p>朱镕基访问</p></body></html>'
    record, _ = read_message(mail("Subject: x\r\n", page.encode("gbk"), "text/html"))
    assert record.html is not None and "朱镕基访问" in record.html


# ---- item 2: the same rule for feeds -----------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with FeedServer() as running:
        yield running


def fetched_feed(server: FeedServer, path: str, body: bytes, content_type: str) -> Feed:
    server.put(path, body, content_type)
    fetched = fetch_feed(server.url(path), timeout=5)
    return parse_feed(fetched.content or b"", fetched.headers, server.url(path))


def test_feeds_with_a_stale_charset_are_read_as_utf8(server: FeedServer) -> None:
    polish, chinese = "Zażółć gęślą jaźń, Łódź", "新闻标题：朱镕基访问北京"
    bare = "<?xml version='1.0'?><rss version='2.0'><channel><title>{t}</title><item><title>{t}</title><guid>1</guid></item></channel></rss>"
    # the HTTP header says latin-2, the bytes are UTF-8: no error anywhere, only mojibake
    feed = fetched_feed(
        server,
        "/stale-header.xml",
        bare.format(t=polish).encode(),
        "application/rss+xml; charset=ISO-8859-2",
    )
    assert feed.title == polish and feed.entries[0].title == polish
    assert feed.warning == (
        f"{server.url('/stale-header.xml')}: the feed declares charset 'ISO-8859-2' but is "
        "UTF-8; read as UTF-8"
    )
    # the XML declaration says gb2312: the warning names it (feedparser's said gb18030)
    declared = bare.replace("<?xml version='1.0'?>", "<?xml version='1.0' encoding='gb2312'?>")
    feed = fetched_feed(
        server, "/stale-decl.xml", declared.format(t=chinese).encode(), "application/rss+xml"
    )
    assert feed.entries[0].title == chinese
    assert feed.warning is not None and "declares charset 'gb2312' but is UTF-8" in feed.warning
    assert "malformed" not in feed.warning
    # iso-8859-1 is read as windows-1252 (its curly quotes), as browsers do
    latin = bare.replace("<?xml version='1.0'?>", "<?xml version='1.0' encoding='iso-8859-1'?>")
    feed = fetched_feed(
        server, "/cp1252.xml", latin.format(t="“Café” – naïve").encode("cp1252"), "application/xml"
    )
    assert feed.entries[0].title == "“Café” – naïve" and feed.warning is None


# ---- item 5: EPUB sections anchored by the table of contents ---------------------------

EPUB = SHARED_DATA / "corpora" / "epub"
OPF_NS = {
    "opf": "http://www.idpf.org/2007/opf",
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
}


def contents_of(book: Path) -> dict[str, str]:
    """The book's table of contents read here with lxml, as a reader lists it: each
    entry's title by its place ("5", "14.1.2"), from nav.xhtml, else toc.ncx."""
    with zipfile.ZipFile(book) as archive:
        container = etree.fromstring(archive.read("META-INF/container.xml"))
        opf_path = container.find(".//c:rootfile", OPF_NS).get("full-path")
        opf = etree.fromstring(archive.read(opf_path))
        folder = posixpath.dirname(opf_path)
        items = opf.findall(".//opf:manifest/opf:item", OPF_NS)
        nav = next((i for i in items if "nav" in (i.get("properties") or "").split()), None)
        titles: dict[str, str] = {}

        def text(node: etree._Element) -> str:
            return " ".join("".join(node.itertext()).split())

        if nav is not None:
            doc = etree.fromstring(archive.read(posixpath.join(folder, nav.get("href"))))
            toc = next(
                n for n in doc.iter("{http://www.w3.org/1999/xhtml}nav")
                if "toc" in (n.get("{http://www.idpf.org/2007/ops}type") or "")
            )  # fmt: skip
            stack = [(toc.find("{http://www.w3.org/1999/xhtml}ol"), "")]
            while stack:
                ol, prefix = stack.pop()
                for n, li in enumerate(ol.findall("{http://www.w3.org/1999/xhtml}li"), 1):
                    label = li[0]  # its <a> or <span>
                    titles[f"{prefix}{n}"] = text(label)
                    inner = li.find("{http://www.w3.org/1999/xhtml}ol")
                    if inner is not None:
                        stack.append((inner, f"{prefix}{n}."))
            return titles
        ncx_id = opf.find(".//opf:spine", OPF_NS).get("toc")
        href = next(i.get("href") for i in items if i.get("id") == ncx_id)
        doc = etree.fromstring(archive.read(posixpath.join(folder, href)))
        daisy = "{http://www.daisy.org/z3986/2005/ncx/}"
        stack = [(doc.find(f"{daisy}navMap"), "")]
        while stack:
            parent, prefix = stack.pop()
            for n, point in enumerate(parent.findall(f"{daisy}navPoint"), 1):
                titles[f"{prefix}{n}"] = text(point.find(f"{daisy}navLabel"))
                stack.append((point, f"{prefix}{n}."))
        return titles


@functools.cache
def epub_doc(name: str) -> ParsedDocument:
    return parse_file(EPUB / name, name, "epub", ParseOptions())


def section_lines(doc: ParsedDocument, anchor: str) -> list[str]:
    section = next(s for s in doc.sections if s.anchor == anchor)
    return doc.body.split("\n")[section.line_start - 1 : section.line_end]


@pytest.mark.shared_data
def test_chapter_one_is_chapter_1_whatever_comes_before_it() -> None:
    """Kusamakura's spine opens with a cover and a contents page: its chapter 一 (I)
    was cited as chapter=2. Now the contents' first entry is chapter=1, and the cover
    keeps an anchor of its own, by its file."""
    doc = epub_doc("kusamakura-japanese-vertical-writing.epub")
    contents = contents_of(EPUB / "kusamakura-japanese-vertical-writing.epub")
    assert contents["1"] == "一" and contents["14"] == "この文書について"
    anchors = {s.anchor: s.label for s in doc.sections}
    assert anchors["chapter=1"] == "一" and anchors["chapter=2"] == "二"
    assert anchors["file=xhtml/表紙.xhtml"] == "草枕"  # the cover: the book's title
    assert "智に働けば角が立つ" in "\n".join(section_lines(doc, "chapter=1"))
    assert [s.anchor for s in doc.sections][:3] == [
        "file=xhtml/表紙.xhtml",
        "chapter=1",
        "chapter=2",
    ]


@pytest.mark.shared_data
def test_every_corpus_epub_anchor_is_its_contents_entry() -> None:
    """For the 13 corpus books, each ``chapter=N`` section carries the title the
    book's own contents list at place N (read here independently), and no text is
    lost or repeated: the sections hold every word the chapters hold."""
    checked = 0
    for path in sorted(EPUB.glob("*.epub")):
        doc = epub_doc(path.name)
        contents = contents_of(path)
        anchors = [s.anchor for s in doc.sections]
        assert len(set(anchors)) == len(anchors), path.name
        for section in doc.sections:
            kind, _, place = section.anchor.partition("=")
            assert kind in ("chapter", "file"), section.anchor
            if kind == "chapter":
                assert contents[place] == section.label, (path.name, section.anchor)
                assert section.heading_path[-1] == section.label
                checked += 1
        assert doc.metadata["chapter_count"] == sum(a.startswith("chapter=") for a in anchors)
    assert checked > 2500  # the Mahabharata's 2,000 and the rest


@pytest.mark.shared_data
def test_a_poem_in_one_file_has_its_five_parts_and_moby_dick_its_chapters() -> None:
    waste = epub_doc("wasteland.epub")
    assert [(s.anchor, s.label) for s in waste.sections] == [
        ("file=wasteland-content.xhtml", "The Waste Land"),
        ("chapter=1", "I. THE BURIAL OF THE DEAD"),
        ("chapter=2", "II. A GAME OF CHESS"),
        ("chapter=3", "III. THE FIRE SERMON"),
        ("chapter=4", "IV. DEATH BY WATER"),
        ("chapter=5", "V. WHAT THE THUNDER SAID"),
        ("chapter=6", 'NOTES ON "THE WASTE LAND"'),
    ]
    burial = section_lines(waste, "chapter=1")
    assert burial[0] == "I. THE BURIAL OF THE DEAD"  # its heading, not "# ..." again
    assert "April is the cruellest month, breeding" in burial
    assert "Phlebas the Phoenician, a fortnight dead," in section_lines(waste, "chapter=4")
    title_page = " ".join(section_lines(waste, "file=wasteland-content.xhtml"))
    assert "T.S. Eliot" in title_page and "For Ezra Pound: il miglior" in title_page
    moby = epub_doc("moby-dick.epub")
    labels = {s.anchor: s.label for s in moby.sections}
    assert (
        labels["chapter=5"] == "Chapter 1. Loomings."
        and labels["chapter=139"] == "Chapter 135. The Chase.—Third Day."
    )
    assert labels["file=toc-short.xhtml"] == "Brief Contents"  # not in its contents
    assert "Call me Ishmael." in "\n".join(section_lines(moby, "chapter=5"))
    # nested contents: a section inside a chapter of a part
    algebra = {s.anchor: s for s in epub_doc("linear-algebra.epub").sections}
    wila = algebra["chapter=14.1.1"]
    assert wila.label == "Section WILA\xa0\xa0What is Linear Algebra?".replace("\xa0", " ").replace(
        "  ", " "
    )
    assert wila.heading_path[:2] == (
        "Part I. Part C Core",
        "Chapter 1. Chapter SLE Systems of Linear Equations",
    )


def built_epub(path: Path, toc: bool = True) -> Path:
    """A book written by ebooklib as converters leave them: a cover and a title page
    before chapter I, chapter I split over two files (the second in no contents
    entry), chapter II in one file with two sections its contents point into (one
    at an id that is not there), and a chapter declaring a stale charset."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("ragline-anchors")
    book.set_title("Harbour Logs")
    book.set_language("en")
    pages = {
        "cover.xhtml": "<p>HARBOUR LOGS — a cover</p>",
        "title.xhtml": "<h1>Harbour Logs</h1><p>by the harbour master</p>",
        "ch1.xhtml": "<h1>Chapter I. Tides</h1><p>The tide tables start in March.</p>",
        "ch1-split.xhtml": "<p>Spring tides follow the full moon.</p>",
        "ch2.xhtml": (
            "<h1>Chapter II. Ships</h1><p>Every ship is logged.</p>"
            "<h2 id='tugs'>Tugs</h2><p>Tugs work the narrow channel.</p>"
            "<section id='ferries'><h2>Ferries</h2><p>Ferries sail at dawn.</p></section>"
        ),
        "ch3.xhtml": "<h1>Chapter III. Café</h1><p>Crème brûlée at the quay café.</p>",
    }
    items = {}
    for name, body in pages.items():
        item = epub.EpubHtml(title=name, file_name=name, lang="en")
        item.content = f"<html><body>{body}</body></html>"
        book.add_item(item)
        items[name] = item
    if toc:
        book.toc = [
            epub.Link("ch1.xhtml", "Chapter I. Tides", "c1"),
            (
                epub.Section("Chapter II. Ships", "ch2.xhtml"),
                [
                    epub.Link("ch2.xhtml#tugs", "Tugs", "tugs"),
                    epub.Link("ch2.xhtml#ferries", "Ferries", "ferries"),
                    epub.Link("ch2.xhtml#gone", "Pilots", "gone"),
                ],
            ),
            epub.Link("ch3.xhtml", "Chapter III. Café", "c3"),
        ]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = list(items.values())
    epub.write_epub(str(path), book)
    # ch3.xhtml stays UTF-8 but its XML declaration now says iso-8859-1
    rewritten = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(rewritten, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename.endswith("ch3.xhtml"):
                data = data.replace(b"encoding='utf-8'", b"encoding='iso-8859-1'", 1)
            target.writestr(info, data)
    rewritten.replace(path)
    return path


def test_a_built_book_cover_title_page_split_chapter_and_sections(tmp_path: Path) -> None:
    doc = parse_file(built_epub(tmp_path / "logs.epub"), "logs.epub", "epub", ParseOptions())
    got = [(s.anchor, s.label, s.heading_path) for s in doc.sections]
    assert got == [
        ("file=cover.xhtml", "cover.xhtml", ("cover.xhtml",)),
        ("file=title.xhtml", "Harbour Logs", ("Harbour Logs",)),
        ("chapter=1", "Chapter I. Tides", ("Chapter I. Tides",)),
        ("file=ch1-split.xhtml", "Chapter I. Tides (continued)", ("Chapter I. Tides",)),
        ("chapter=2", "Chapter II. Ships", ("Chapter II. Ships",)),
        ("chapter=2.1", "Tugs", ("Chapter II. Ships", "Tugs")),
        ("chapter=2.2", "Ferries", ("Chapter II. Ships", "Ferries")),
        ("chapter=3", "Chapter III. Café", ("Chapter III. Café",)),
    ]
    # "Pilots" points at an id that is not there: where a reader opens, the start of
    # ch2.xhtml, where "Chapter II. Ships" (its last entry there) owns the text
    assert section_lines(doc, "chapter=2") == ["Chapter II. Ships", "", "Every ship is logged."]
    assert section_lines(doc, "chapter=2.1") == ["Tugs", "", "Tugs work the narrow channel."]
    assert "Crème brûlée at the quay café." in section_lines(doc, "chapter=3")
    assert doc.warnings == (
        "chapter ch3.xhtml declares charset 'iso-8859-1' but is UTF-8; read as UTF-8",
    )
    # with an empty table of contents every part is anchored by its file
    bare = parse_file(built_epub(tmp_path / "bare.epub", toc=False), "b", "epub", ParseOptions())
    assert [s.anchor for s in bare.sections][:3] == [
        "file=cover.xhtml", "file=title.xhtml", "file=ch1.xhtml",
    ]  # fmt: skip


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    """A documents source of a corpus book and a built one, indexed by the real job (Dagster,
    LanceDB, Tantivy, the bundled model)."""
    root = tmp_path_factory.mktemp("books")
    folder = root / "books"
    folder.mkdir()
    shutil.copy(EPUB / "wasteland.epub", folder / "wasteland.epub")
    built_epub(folder / "logs.epub")
    return build_index(
        write_config(root, [{"name": "books", "kind": "documents", "path": str(folder)}])
    )


@pytest.mark.shared_data
def test_hits_and_mcp_open_agree_on_the_contents_anchor(books: RaglineConfig) -> None:
    from rag_serving.mcp.auth import LOCAL_ACCESS
    from rag_serving.mcp.service import RaglineService

    engine = SearchEngine(books)
    service = RaglineService(books)
    for query, location, label, line in (
        ("April is the cruellest month", "wasteland.epub#chapter=1", "I. THE BURIAL OF THE DEAD",
         "April is the cruellest month, breeding"),
        ("Phlebas the Phoenician", "wasteland.epub#chapter=4", "IV. DEATH BY WATER",
         "Phlebas the Phoenician, a fortnight dead,"),
        ("tide tables start in March", "logs.epub#chapter=1", "Chapter I. Tides", None),
        ("Tugs work the narrow channel", "logs.epub#chapter=2.1", "Tugs", None),
    ):  # fmt: skip
        hit = engine.search(query, k=1, mode="bm25").hits[0]
        # the hit names the contents entry and those around it: "Chapter II. Ships > Tugs"
        assert hit.location == location and hit.anchor.split(" > ")[-1] == label, query
        opened = service.open(LOCAL_ACCESS, id=hit.chunk_id)  # the part the hit is on
        anchor = location.partition("#")[2]
        assert (opened.anchor, opened.section) == (anchor, label)
        by_anchor = service.open(LOCAL_ACCESS, id=hit.doc_id, section=anchor)
        by_title = service.open(LOCAL_ACCESS, id=hit.doc_id, section=label)
        assert by_anchor.text == by_title.text == opened.text
        assert line is None or line in opened.text.split("\n")
    title_page = service.open(
        LOCAL_ACCESS, source="books", path="wasteland.epub", section="file=wasteland-content.xhtml"
    )
    assert title_page.section == "The Waste Land" and "T.S. Eliot" in title_page.text
    assert "April" not in title_page.text


# ---- item 9 (first half): a web page in an OPML file ------------------------------------


def page(title: str, links: str = "") -> bytes:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<link rel='stylesheet' href='/style.css'>{links}</head>"
        f"<body><h1>{title}</h1><p>Welcome to {title}.</p></body></html>"
    ).encode()


def opml_naming(path: Path, urls: dict[str, str]) -> Path:
    outlines = "".join(f'<outline text="{name}" xmlUrl="{url}"/>' for name, url in urls.items())
    path.write_text(
        f'<opml version="2.0"><body><outline text="Sites">{outlines}</outline></body></opml>'
    )
    return path


@pytest.fixture(scope="module")
def lan():
    """A server on this machine's network address: a site elsewhere, as far as the
    address checks can tell (a private-network address, not loopback)."""
    with FeedServer(host=lan_address()) as running:
        yield running


def test_a_web_page_in_an_opml_file_is_read_through_the_feed_it_names(
    tmp_path: Path, server: FeedServer
) -> None:
    # a WordPress-like page: its REST record first (application/json, not a feed),
    # then its posts feed, then its comments feed; relative links, a <base>
    server.put(
        "/blog/",
        page(
            "Harbour blog",
            "<base href='/blog/'>"
            "<link rel='alternate' type='application/json' href='/wp-json/wp/v2/pages/7'>"
            "<link rel='alternate' type='application/rss+xml' title='Feed' href='feed.xml'>"
            "<link rel='alternate' type='application/rss+xml' title='Comments' href='comments.xml'>",
        ),
        "text/html; charset=utf-8",
    )
    server.put("/blog/feed.xml", rss("Harbour blog", "Tugs at dawn", "Ferry timetable"))
    server.put(
        "/about.html",
        page("About us", "<link rel='alternate' hreflang='fr' href='/fr/'>"),
        "text/html",
    )
    # a page whose only feed link leads to a file of this machine
    server.put(
        "/sneaky.html",
        page(
            "Sneaky", "<link rel='alternate' type='application/atom+xml' href='file:///etc/passwd'>"
        ),
        "text/html",
    )
    # a feed a careless server sends as text/html is still a feed
    server.put("/as-html.xml", rss("Careless", "Served as HTML"), "text/html")
    opml = opml_naming(
        tmp_path / "subs.opml",
        {
            "Blog": server.url("/blog/"), "About": server.url("/about.html"),
            "Sneaky": server.url("/sneaky.html"), "Careless": server.url("/as-html.xml"),
        },
    )  # fmt: skip
    config = FeedsSourceConfig(name="n", kind="feeds", opml=opml, timeout_seconds=3)
    state_dir = tmp_path / "state"
    report = refresh_feeds(config, state_dir)
    outcomes = {o.url: o for o in report.outcomes}
    blog = outcomes[server.url("/blog/")]
    assert (blog.status, blog.new) == ("fetched", 2)
    about = outcomes[server.url("/about.html")]
    assert about.status == "error" and about.message == (
        f"{server.url('/about.html')}: a web page, not a feed, and it names no feed (no <link "
        'rel="alternate"> to an RSS, Atom or JSON feed); list the site\'s feed address instead'
    )
    assert "names no feed" in (outcomes[server.url("/sneaky.html")].message or "")
    assert outcomes[server.url("/as-html.xml")].status == "fetched"
    for name in ("/about.html", "/sneaky.html"):  # once a "malformed feed … tell the owner"
        message = outcomes[server.url(name)].message or ""
        assert "malformed" not in message and "owner" not in message and "\n" not in message
    spec = next(s for s in archive.configured_feeds(config) if s.url == server.url("/blog/"))
    state = archive.load_state(state_dir, spec)
    assert state is not None and state.feed_url == server.url("/blog/feed.xml")
    assert state.title == "Harbour blog" and server.requests_for("/blog/comments.xml") == []
    # the listing shows the page's entries under the page, and the pages without a feed
    items = list(list_archived_entries(config, state_dir))
    assert sum(i.key.startswith(spec.feed_id + "/") and not i.problem for i in items) == 2
    assert {i.problem for i in items if i.problem} >= {about.message}

    # the next poll reads the remembered feed (conditionally: 304), not the page
    pages_before = len(server.requests_for("/blog/"))
    again = {o.url: o for o in refresh_feeds(config, state_dir, force=True).outcomes}
    assert again[server.url("/blog/")].status == "not-modified"
    assert len(server.requests_for("/blog/")) == pages_before
    assert server.requests_for("/blog/feed.xml")[-1].status == 304

    # the site moves its feed: the remembered one is gone (404), the page is asked again
    del server.documents["/blog/feed.xml"]
    server.put("/blog/", page("Harbour blog", "<link rel='alternate' type='application/atom+xml' href='/blog/atom.xml'>"), "text/html")  # fmt: skip
    server.put(
        "/blog/atom.xml",
        b"<?xml version='1.0'?><feed xmlns='http://www.w3.org/2005/Atom'><title>Harbour blog</title>"
        b"<entry><id>urn:x:3</id><title>Pilots</title><updated>2024-04-02T10:00:00Z</updated></entry></feed>",
        "application/atom+xml",
    )
    moved = {o.url: o for o in refresh_feeds(config, state_dir, force=True).outcomes}
    assert (moved[server.url("/blog/")].status, moved[server.url("/blog/")].new) == ("fetched", 1)
    assert archive.load_state(state_dir, spec).feed_url == server.url("/blog/atom.xml")


def test_a_page_elsewhere_may_not_name_a_feed_on_this_machine(
    tmp_path: Path, server: FeedServer, lan: FeedServer
) -> None:
    """The feed a page names is fetched under the page's address rules: a page on a
    private network may not lead the fetch to this machine's loopback."""
    server.put("/secret.xml", rss("Secret", "the admin console's token"))
    lan.put(
        "/page.html",
        page("Elsewhere", f"<link rel='alternate' type='application/rss+xml' href='{server.url('/secret.xml')}'>"),
        "text/html",
    )  # fmt: skip
    config = FeedsSourceConfig(name="n", kind="feeds", opml=opml_naming(tmp_path / "s.opml", {"P": lan.url("/page.html")}), timeout_seconds=3)  # fmt: skip
    [outcome] = refresh_feeds(config, tmp_path / "state").outcomes
    assert outcome.status == "error" and outcome.message is not None
    assert outcome.message.startswith(
        f"{lan.url('/page.html')}: a web page, whose feed {server.url('/secret.xml')} cannot be "
        f"fetched: {server.url('/secret.xml')}: refused to connect to"
    )
    assert server.requests_for("/secret.xml") == []  # never reached
