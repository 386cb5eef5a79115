"""Reading bytes in a declared charset the way browsers and mail readers do, without
letting a stale declaration garble text that is valid UTF-8.

Labels follow the WHATWG Encoding Standard's table (https://encoding.spec.whatwg.org/
#names-and-labels), which browsers apply to web pages and feeds and mail readers to
mail: ``gb2312`` and ``gbk`` are read as GB18030 (a page declaring gb2312 uses GBK
characters that Python's strict gb2312 codec refuses), ``iso-8859-1``, ``latin1``
and ``us-ascii`` as windows-1252, ``ks_c_5601-1987`` as windows-949, ``shift_jis``
as windows-31j, ``big5`` as Big5-HKSCS.

The one rule added to the browsers': text whose declared charset is not UTF-8 but
whose bytes are valid UTF-8 with non-ASCII characters is read as UTF-8, with a
warning naming the declaration. Real text in a legacy charset is almost never valid
UTF-8 by chance (a Latin-1 "é" is one byte ≥ 0x80 followed by ASCII, which UTF-8
refuses), while pages and mail copied into UTF-8 with their old declaration are
common (a readability test page declares gb2312 and was 58 % U+FFFD). A multi-byte
declared charset that decodes the bytes cleanly is believed unless the text has
enough non-ASCII bytes for the UTF-8 reading to be beyond chance.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

__all__ = ["Decoded", "codec_for", "decode_declared", "markup_charset"]

_UTF8 = "utf-8"
# Enough non-ASCII bytes that valid UTF-8 is no accident of a multi-byte charset:
# a GBK or Shift_JIS character is valid UTF-8 by chance about one time in ten.
_UTF8_EVIDENCE_BYTES = 8


_HIGH_BYTES = bytes(range(0x80, 0x100))


def _labels(codec: str, *labels: str) -> dict[str, str]:
    return dict.fromkeys(labels, codec)


# WHATWG labels whose encoding differs from what Python's codec of that name reads.
_WHATWG: dict[str, str] = {
    **_labels(
        "cp1252", "ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819",
        "iso-8859-1", "iso-ir-100", "iso8859-1", "iso88591", "iso_8859-1",
        "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252", "x-cp1252",
    ),
    **_labels(
        "cp1254", "cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9",
        "iso88599", "iso_8859-9", "iso_8859-9:1989", "l5", "latin5", "windows-1254",
        "x-cp1254",
    ),
    **_labels(
        "cp874", "dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620",
        "windows-874",
    ),
    **_labels(
        "gb18030", "chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312",
        "gb_2312-80", "gbk", "iso-ir-58", "x-gbk", "gb18030",
    ),
    **_labels("big5hkscs", "big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    **_labels(
        "cp949", "cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean",
        "ks_c_5601-1987", "ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949",
    ),
    **_labels(
        "cp932", "csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis",
        "windows-31j", "x-sjis",
    ),
    **_labels("iso8859-8", "csiso88598i", "iso-8859-8-i", "logical"),
    **_labels("koi8-u", "koi8-ru", "koi8-u"),
    **_labels("mac-roman", "csmacintosh", "mac", "macintosh", "x-mac-roman"),
    **_labels("mac-cyrillic", "x-mac-cyrillic", "x-mac-ukrainian"),
}  # fmt: skip
# Python codecs no declared text may name: they are not charsets (escapes, IDNA) or
# decode nothing at all.
_NOT_CHARSETS = frozenset({"undefined", "unicode-escape", "raw-unicode-escape", "punycode", "idna"})


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_XML_ENCODING = re.compile(rb"""^<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""", re.I)
MARKUP_HEAD_BYTES = 4096  # where a page's charset declaration is looked for


def markup_charset(data: bytes) -> str | None:
    """The charset label an (X)HTML document declares in its first bytes: its
    ``<?xml encoding>``, else a ``<meta charset>`` or ``http-equiv`` one. A ``<meta>``
    naming UTF-16 or x-user-defined cannot be right (the bytes read as ASCII this
    far): the HTML standard reads them as UTF-8 and windows-1252."""
    head = data[:MARKUP_HEAD_BYTES]
    xml = _XML_ENCODING.match(head)
    if xml is not None:
        return xml.group(1).decode("ascii")
    meta = _META_CHARSET.search(head)
    if meta is None:
        return None
    label = meta.group(1).decode("ascii")
    if (codec_for(label) or "").startswith(("utf-16", "utf-32")):
        return "utf-8"
    return "windows-1252" if label.lower() == "x-user-defined" else label


def codec_for(label: str | None) -> str | None:
    """The Python codec that reads text declared as ``label`` (a WHATWG or MIME label,
    any case), or None when the label names no text encoding."""
    if not label:
        return None
    key = label.strip().strip("\"'").lower()
    if key in _WHATWG:
        return codecs.lookup(_WHATWG[key]).name
    try:
        info = codecs.lookup(key)
    except (LookupError, ValueError):
        return None
    # base64, rot13, zlib... are codecs too, but not of bytes to text
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None
    return info.name


@dataclass(frozen=True)
class Decoded:
    """Text read from bytes: the codec used and, when the declaration was not
    followed or bytes were replaced, a one-line warning."""

    text: str
    codec: str
    warning: str | None = None


def _is_utf16_or_32(codec: str) -> bool:
    return codec.startswith(("utf-16", "utf-32"))


def decode_declared(
    data: bytes, declared: str | None, *, what: str = "the text", undeclared: str | None = None
) -> Decoded:
    """``data`` read in the charset ``declared`` (a label; None when nothing says), or
    as UTF-8 where that declaration is stale (see the module's docstring). With no
    declaration the bytes are read as UTF-8, or when they are not UTF-8 in the
    charset labelled ``undeclared`` if given (mail: MIME's default, us-ascii, which
    the WHATWG table reads as windows-1252), silently. Bytes the chosen charset cannot
    read are replaced (U+FFFD) and counted in the warning. ``what`` names the text in
    warnings ("the page")."""
    if not declared and undeclared:
        try:
            return Decoded(data.decode(_UTF8), _UTF8)
        except UnicodeDecodeError:
            fallback = codec_for(undeclared) or _UTF8
            text, bad = _replacing(data, fallback)
            warning = (
                f"{what} declares no charset and is not UTF-8; read as {undeclared}, "
                f"{_bytes(bad)} replaced"
            )
            return Decoded(text, fallback, warning if bad else None)
    codec = codec_for(declared)
    label = " ".join((declared or "").split())[:40]
    high = 0 if data.isascii() else len(data) - len(data.translate(None, _HIGH_BYTES))
    utf8: str | None = None
    if high and codec != _UTF8 and not (codec and codec.startswith(("utf-16", "utf-32"))):
        try:
            utf8 = data.decode(_UTF8)
        except UnicodeDecodeError:
            utf8 = None
    if codec is None:
        why = f"declares an unknown charset {label!r}" if label else "declares no charset"
        if utf8 is not None or not high:
            text = utf8 if utf8 is not None else data.decode(_UTF8)
            return Decoded(text, _UTF8, f"{what} {why}; read as UTF-8" if label else None)
        text, bad = _replacing(data, _UTF8)
        return Decoded(text, _UTF8, f"{what} {why} and is not UTF-8; {_bytes(bad)} replaced")
    try:
        text = data.decode(codec)
    except UnicodeDecodeError:
        text = None
    if utf8 is not None and (
        text is None or len(text) == len(data) or high >= _UTF8_EVIDENCE_BYTES
    ):
        # Declared text that fails, or a single-byte charset (each byte one character,
        # so any bytes "decode"), or enough UTF-8 sequences to rule out chance.
        return Decoded(
            utf8, _UTF8, f"{what} declares charset {label!r} but is UTF-8; read as UTF-8"
        )
    if text is not None:
        return Decoded(text, codec)
    text, bad = _replacing(data, codec)
    return Decoded(
        text, codec, f"{what} is not valid {label} (its declared charset); {_bytes(bad)} replaced"
    )


def _bytes(count: int) -> str:
    return f"{count:,} unreadable byte sequence" + ("" if count == 1 else "s")


def _replacing(data: bytes, codec: str) -> tuple[str, int]:
    """``data`` decoded with bad bytes replaced, and how many U+FFFD that added."""
    text = data.decode(codec, errors="replace")
    held = "\ufffd".encode(codec, errors="ignore")  # U+FFFD the bytes really hold
    return text, text.count("\ufffd") - (data.count(held) if held else 0)
