"""ZIP-based formats (DOCX, PPTX, XLSX, EPUB): what a file may unpack to, checked
before a library opens it.

python-docx, python-pptx, openpyxl and ebooklib open the ZIP themselves and read
members whole, so a 1 MB file that inflates to gigabytes is read into memory before
any of them looks at it. ``check_archive`` runs first, with the standard library's
``zipfile`` and the source's ``[limits]``:

- the member count, read from the end-of-central-directory record before
  ``zipfile`` builds an object per member (``max_zip_members``);
- only stored and deflated members (what OOXML and EPUB allow): ``zipfile`` inflates
  bzip2 and LZMA members without an output bound;
- the declared sizes together (``max_unpacked_bytes``) and, for members over 1 MB,
  the declared size against the packed size (``max_unpack_ratio``); one markup part
  that a library parses whole into a tree at most ``max_markup_part_bytes``;
- every deflated member inflated once, a chunk at a time, to its end: ``zipfile``
  never returns more than the declared size and fails the CRC of a member whose
  data inflates to more (a header that lies), but its whole-member ``read()`` inflates
  the packed bytes in one call before it cuts them. Once every member is known to
  inflate to exactly what it declares, the libraries' own reads stay within the caps.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO

from rag_sources.formats.model import ItemError, ItemSkipped
from rag_sources.limits import Limits

__all__ = ["ZIP_ERRORS", "check_archive", "size_text"]

# Members of one package: a big EPUB or workbook has a few thousand; each costs
# zipfile an object before anything is read.
# Members at most this large are not held to the ratio (a small XML part packs well).
RATIO_MIN_BYTES = 1 << 20
# Bytes of one markup part a library parses whole into a tree (a DOCX's document.xml,
# a slide, an EPUB chapter): lxml and lexbor take 5-8 times that in memory. A
# 1,000-page report's document.xml is ~20 MB. XLSX worksheets are streamed, not held.
_MARKUP_SUFFIXES = (".xml", ".rels", ".xhtml", ".html", ".htm", ".opf", ".ncx", ".svg")
_STREAMED_PREFIXES = ("xl/worksheets/",)
_CHUNK = 1 << 16
# signature, versions, flags, method, time, date, CRC, sizes, name and extra lengths
_LOCAL_HEADER = struct.Struct("<4s5H3L2H")

# What a damaged ZIP raises while it is opened or a member read: CRC, inflate, short
# data; RuntimeError for a member flagged as encrypted and (NotImplementedError) an
# unsupported version or compression method.
ZIP_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    RuntimeError,
    NotImplementedError,
)
_ALLOWED_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_METHOD_NAMES = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "LZMA"}


def size_text(size: int) -> str:
    """``268435456`` -> ``"256 MiB"`` (binary units, as the caps are set)."""
    if size < 1024:
        return f"{size:,} bytes"
    value = float(size)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:,.1f} {unit}".replace(".0 ", " ")


def _declared_members(full_path: Path) -> int | None:
    """The member count the end-of-central-directory record declares (None: unreadable)."""
    try:
        with full_path.open("rb") as f:
            record = zipfile._EndRecData(f)  # type: ignore[attr-defined]
    except (OSError, AttributeError, *ZIP_ERRORS):
        return None
    if not record:
        return None
    return int(record[zipfile._ECD_ENTRIES_TOTAL])  # type: ignore[attr-defined]


def check_archive(full_path: Path, limits: Limits, kind: str) -> None:
    """Refuse the ZIP package at ``full_path`` (a ``kind`` file: "DOCX", "EPUB", ...)
    when it would unpack past ``limits``, or when a member's header lies about its size.

    Over a cap: ``ItemSkipped`` naming the ``[limits]`` key to raise. Damaged or
    forged: ``ItemError``. A file that is no ZIP at all passes, for the parser to
    report in its own words.
    """
    declared = _declared_members(full_path)
    if declared is not None and declared > limits.max_zip_members:
        raise ItemSkipped(_too_many_members(kind, declared, limits))
    try:
        package = zipfile.ZipFile(full_path)
    except (OSError, *ZIP_ERRORS):
        return  # not a ZIP: the parser says so
    with package:
        members = package.infolist()
        if len(members) > limits.max_zip_members:
            raise ItemSkipped(_too_many_members(kind, len(members), limits))
        _check_declared(members, limits, kind)
        try:
            raw = full_path.open("rb")
        except OSError:
            return  # the parser reports an unreadable file
        with raw:
            for member in members:
                if member.compress_type == zipfile.ZIP_DEFLATED:
                    _inflate_to_end(raw, member, kind)


def _too_many_members(kind: str, count: int, limits: Limits) -> str:
    return (
        f"{kind} package with {count:,} members, more than [limits] max_zip_members "
        f"({limits.max_zip_members:,}); not opened: a document this fragmented is most "
        "likely hostile (raise the limit if it is genuine)"
    )


def _check_declared(members: list[zipfile.ZipInfo], limits: Limits, kind: str) -> None:
    total = 0
    for member in members:
        if member.compress_type not in _ALLOWED_METHODS:
            method = _METHOD_NAMES.get(member.compress_type, f"method {member.compress_type}")
            raise ItemError(
                f"{kind} member {_name(member)} is packed with {method}, which {kind} files "
                f"never use; re-save the file"
            )
        if member.flag_bits & 0x1:
            raise ItemError(
                f"{kind} member {_name(member)} is encrypted; remove the password or "
                "exclude the file"
            )
        total += member.file_size
        if member.file_size > RATIO_MIN_BYTES:
            ratio = member.file_size / max(member.compress_size, 1)
            if ratio > limits.max_unpack_ratio:
                raise ItemSkipped(
                    f"{kind} member {_name(member)} unpacks {ratio:,.0f}:1 "
                    f"({size_text(member.compress_size)} to {size_text(member.file_size)}), "
                    f"more than [limits] max_unpack_ratio ({limits.max_unpack_ratio}); "
                    "a zip bomb, or raise the limit if the file is genuine"
                )
    if total > limits.max_unpacked_bytes:
        raise ItemSkipped(
            f"{kind} unpacks to {size_text(total)}, more than [limits] max_unpacked_bytes "
            f"({size_text(limits.max_unpacked_bytes)}); raise the limit to index it"
        )
    for member in members:
        name = member.filename.lower()
        if (
            member.file_size > limits.max_markup_part_bytes
            and name.endswith(_MARKUP_SUFFIXES)
            and not name.startswith(_STREAMED_PREFIXES)
        ):
            raise ItemSkipped(
                f"{kind} member {_name(member)} unpacks to {size_text(member.file_size)} of "
                f"markup, more than [limits] max_markup_part_bytes "
                f"({size_text(limits.max_markup_part_bytes)}; a part is parsed whole): split "
                "the document or raise the limit to index it"
            )


def _inflate_to_end(f: BinaryIO, member: zipfile.ZipInfo, kind: str) -> None:
    """Inflate one member's packed bytes a chunk at a time and compare what comes out
    with the declared size.

    zipfile cuts a member at its declared size (and a forger can set the CRC of that
    prefix), but only after inflating a whole ``read()`` in one call: the packed bytes
    are read here directly, so a lying header is found in bounded memory.
    """
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    produced = 0
    try:
        f.seek(member.header_offset)
        header = f.read(_LOCAL_HEADER.size)
        if len(header) < _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            raise ValueError("no local header")
        name_length, extra_length = _LOCAL_HEADER.unpack(header)[-2:]
        f.seek(member.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
        left = member.compress_size
        while left > 0 and not inflater.eof:
            packed = f.read(min(_CHUNK, left))
            if not packed:
                break
            left -= len(packed)
            while packed and not inflater.eof:
                produced += len(inflater.decompress(packed, _CHUNK))
                if produced > member.file_size:
                    raise ValueError("longer than declared")
                packed = inflater.unconsumed_tail
    except (OSError, ValueError, zlib.error, struct.error):
        produced = -1
    if produced != member.file_size:
        raise ItemError(
            f"{kind} member {_name(member)} does not unpack to the size its header declares "
            "(damaged, or forged to hide its size); re-save the file or exclude it"
        )


def _name(member: zipfile.ZipInfo) -> str:
    """A member's name for a message: printable, short."""
    name = "".join(c if c.isprintable() else "?" for c in member.filename)
    return repr(name if len(name) <= 80 else name[:77] + "...")
