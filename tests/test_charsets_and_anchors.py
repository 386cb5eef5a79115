"""Issue 27, items 2, 5 and 9 (first half): text read in the charset it really is in
(HTML pages, EPUB chapters, mail parts and headers, feeds), EPUB sections anchored by
the book's table of contents, and feeds named by a web page found through the page's
``<link rel="alternate">``. Real files: pages and mail built here in the charsets
they declare, the 13 EPUBs and the feeds of ../shared/data, a real HTTP server."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_assets.formats.model import ParsedDocument, ParseOptions
from rag_assets.formats.router import parse_file
from rag_serving.charsets import codec_for, decode_declared

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
