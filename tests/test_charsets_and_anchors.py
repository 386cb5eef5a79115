"""Issue 27, items 2, 5 and 9 (first half): text read in the charset it really is in
(HTML pages, EPUB chapters, mail parts and headers, feeds), EPUB sections anchored by
the book's table of contents, and feeds named by a web page found through the page's
``<link rel="alternate">``. Real files: pages and mail built here in the charsets
they declare, the 13 EPUBs and the feeds of ../shared/data, a real HTTP server."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from rag_assets.formats.model import ParsedDocument, ParseOptions
from rag_assets.formats.router import parse_file
from rag_serving.charsets import codec_for, decode_declared
from rag_serving.feeds.fetch import fetch_feed
from rag_serving.feeds.parse import Feed, parse_feed
from rag_serving.mailstore.message import read_message
from tests.feed_server import FeedServer

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
