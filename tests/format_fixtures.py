"""Real documents built inside the tests: DOCX, PPTX, XLSX, image-only PDF, PNG.

Each builder writes a file with the library that reads it back in production
(python-docx, python-pptx, openpyxl, PyMuPDF), so the parsers see genuine files.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO

OCR_TEXT = (
    "Quarterly maintenance report for the northern pumping station.\n"
    "Inspectors replaced three valves and recalibrated the pressure sensors.\n"
    "The next inspection is scheduled for early spring."
)


def make_docx(path: Path) -> Path:
    """A DOCX with core properties, headings, a list, a table and body text."""
    import docx

    document = docx.Document()
    props = document.core_properties
    props.title = "Pump Station Handbook"
    props.author = "Ada Lovelace"
    props.created = datetime(2024, 3, 1, 9, 30)
    props.modified = datetime(2024, 4, 2, 10, 0)
    document.add_heading("Introduction", level=1)
    document.add_paragraph("The station moves water from the river to the reservoir.")
    document.add_heading("Valves", level=2)
    document.add_paragraph("Check every valve monthly.", style="List Bullet")
    document.add_paragraph("Replace worn gaskets.", style="List Bullet")
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate(
        [("Valve", "Size", "Status"), ("V1", "40 mm", "ok"), ("V2", "60 mm", "worn")]
    ):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("After the table comes the closing paragraph.")
    document.add_paragraph("# not a heading, just a hash at the start")
    document.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    """A PPTX: title slide, bullets + notes, a group and a table, a slide without title."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    prs.core_properties.title = "Roadmap 2025"
    slide = prs.slides.add_slide(prs.slide_layouts[0])
    slide.shapes.title.text = "Roadmap 2025"
    slide.placeholders[1].text = "Platform team"

    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Goals"
    slide.placeholders[1].text = "Faster search\nFresher index"
    slide.notes_slide.notes_text_frame.text = "Mention the latency budget."

    slide = prs.slides.add_slide(prs.slide_layouts[5])  # title only
    slide.shapes.title.text = "Milestones"
    group = slide.shapes.add_group_shape()
    box = group.shapes.add_textbox(Inches(1), Inches(2), Inches(3), Inches(1))
    box.text_frame.text = "Grouped milestone text"
    rows = slide.shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    for r, row in enumerate([("Quarter", "Goal"), ("Q1", "OCR")]):
        for c, value in enumerate(row):
            rows.cell(r, c).text = value

    slide = prs.slides.add_slide(prs.slide_layouts[6])  # blank: no title
    box = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1))
    box.text_frame.text = "Untitled slide body"
    prs.save(str(path))
    return path


def make_xlsx(path: Path, data_rows: int) -> Path:
    """A workbook: "Sales" (header + ``data_rows`` rows and a formula), "Empty", "Notes"."""
    import openpyxl

    wb = openpyxl.Workbook()
    sales = wb.active
    sales.title = "Sales"
    sales.append(["Region", "Units", "Price"])
    for i in range(data_rows):
        sales.append([f"Region {i + 1}", i + 1, 2.5])
    wb.create_sheet("Empty")
    notes = wb.create_sheet("Notes")
    notes.append(["Checked by", "Grace"])
    notes.append([])
    notes.append([None, None])
    notes.append(["Total", "=1+1"])
    wb.properties.title = "Sales figures"
    wb.save(str(path))
    return path


def render_text_png(text: str = OCR_TEXT, dpi: int = 200) -> bytes:
    """PNG bytes of ``text`` typeset on an A4-wide strip (no text layer, just pixels)."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=595, height=260)
    page.insert_textbox(pymupdf.Rect(40, 40, 555, 240), text, fontsize=13, fontname="helv")
    png = page.get_pixmap(dpi=dpi).tobytes("png")
    doc.close()
    return png


def make_image_pdf(path: Path, pages: int = 1, text: str = OCR_TEXT) -> Path:
    """A PDF whose pages are only pictures of ``text`` (no text layer): a scan."""
    import pymupdf

    png = render_text_png(text)
    doc = pymupdf.open()
    for _ in range(pages):
        page = doc.new_page(width=595, height=260)
        page.insert_image(page.rect, stream=png)
    doc.save(str(path))
    doc.close()
    return path


def make_text_pdf(path: Path, pages: list[str]) -> Path:
    """A born-digital PDF with one page per string."""
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=11)
    doc.save(str(path))
    doc.close()
    return path


def make_png(path: Path, text: str = OCR_TEXT) -> Path:
    path.write_bytes(render_text_png(text))
    return path


def encrypt_ooxml(source: Path, target: Path, password: str = "secret") -> Path:
    """An encrypted copy of a DOCX/PPTX/XLSX (msoffcrypto-tool's OOXML encryption)."""
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    with source.open("rb") as f:
        OOXMLFile(f).encrypt(password, out)
    target.write_bytes(out.getvalue())
    return target


def truncate(source: Path, target: Path, keep: float = 0.5) -> Path:
    """A copy of ``source`` cut to ``keep`` of its bytes (a broken download)."""
    data = source.read_bytes()
    target.write_bytes(data[: int(len(data) * keep)])
    return target


# ---- hostile inputs (issue 26): small files that unpack or render to gigabytes ----


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    import struct
    import zlib

    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def make_png_bomb(path: Path, width: int = 30_000, height: int = 30_000) -> Path:
    """A 1-bit black PNG of ``width`` × ``height`` pixels, streamed (30,000² is ~109 kB
    on disk and 900 Mpx decoded): what a decoder allocates follows the header."""
    import struct
    import zlib

    row = bytes(1 + (width + 7) // 8)  # filter byte 0, then black pixels: one long run
    packer = zlib.compressobj(9)
    parts = [packer.compress(row * min(1000, height - done)) for done in range(0, height, 1000)]
    parts.append(packer.flush())
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)  # 1-bit greyscale
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", b"".join(parts))
        + _png_chunk(b"IEND", b"")
    )
    return path


# A member's content, written in pieces so that a gigabyte never sits in memory.
MemberWriter = Callable[[IO[bytes]], None]


def padded(prefix: bytes, pad: int, suffix: bytes, fill: bytes = b" ") -> MemberWriter:
    """``prefix``, then ``pad`` bytes of ``fill`` (1 MiB at a time), then ``suffix``."""

    def write(out: IO[bytes]) -> None:
        out.write(prefix)
        block = fill * ((1 << 20) // len(fill))
        left = pad
        while left > 0:
            out.write(block[:left])
            left -= len(block)
        out.write(suffix)

    return write


def pad_before(data: bytes, marker: bytes, pad: int, fill: bytes = b" ") -> MemberWriter:
    """``data`` with ``pad`` bytes of ``fill`` inserted before the last ``marker``."""
    at = data.rindex(marker)
    return padded(data[:at], pad, data[at:], fill)


def rewrite_zip(
    source: Path,
    target: Path,
    members: dict[str, bytes | MemberWriter] | None = None,
    compress_type: int = zipfile.ZIP_DEFLATED,
) -> Path:
    """A copy of the ZIP package ``source`` with ``members`` replaced (or added at the
    end): bytes as they are, a ``MemberWriter`` streamed; ``compress_type`` for those."""
    members = dict(members or {})
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            content = members.pop(info.filename, None)
            if content is None:
                new.writestr(info, old.read(info.filename), compress_type=info.compress_type)
            else:
                _write_member(new, info.filename, content, compress_type)
        for name, content in members.items():
            _write_member(new, name, content, compress_type)
    return target


def _write_member(
    package: zipfile.ZipFile, name: str, content: bytes | MemberWriter, compress_type: int
) -> None:
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = compress_type
    if isinstance(content, bytes):
        package.writestr(info, content, compresslevel=9)
        return
    package.compresslevel = 9
    with package.open(info, "w", force_zip64=True) as out:
        content(out)


def forge_declared_size(path: Path, member: str, declared: int) -> Path:
    """Make ``member``'s headers declare ``declared`` bytes (less than its data inflates
    to), with the CRC of that prefix: what zipfile reads back then passes its checks."""
    with zipfile.ZipFile(path) as package:
        info = package.getinfo(member)
        with package.open(info) as data:
            crc = zlib.crc32(data.read(declared))
    raw = bytearray(path.read_bytes())
    name = member.encode()
    local = info.header_offset
    assert raw[local : local + 4] == b"PK\x03\x04"
    struct.pack_into("<L", raw, local + 14, crc)
    _patch_size(raw, local + 22, local + 30 + len(name), declared)
    central = raw.find(b"PK\x01\x02")
    while central >= 0:
        name_length = struct.unpack_from("<H", raw, central + 28)[0]
        if raw[central + 46 : central + 46 + name_length] == name:
            struct.pack_into("<L", raw, central + 16, crc)
            _patch_size(raw, central + 24, central + 46 + name_length, declared)
            break
        central = raw.find(b"PK\x01\x02", central + 4)
    path.write_bytes(bytes(raw))
    return path


def _patch_size(raw: bytearray, field: int, name_end: int, size: int) -> None:
    """Set an uncompressed-size field, or its ZIP64 extra when the field says 0xFFFFFFFF."""
    if struct.unpack_from("<L", raw, field)[0] != 0xFFFFFFFF:
        struct.pack_into("<L", raw, field, size)
        return
    assert raw[name_end : name_end + 2] == b"\x01\x00"  # the ZIP64 extra, size first
    struct.pack_into("<Q", raw, name_end + 4, size)


def make_epub(path: Path, chapters: list[tuple[str, str]], title: str = "Field notes") -> Path:
    """An EPUB 3 written by ebooklib: one spine document per ``(title, html body)``."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier(f"ragline-test-{path.stem}")
    book.set_title(title)
    book.set_language("en")
    items = []
    for number, (heading, body) in enumerate(chapters, start=1):
        item = epub.EpubHtml(title=heading, file_name=f"chapter{number}.xhtml", lang="en")
        item.content = f"<html><body><h1>{heading}</h1>{body}</body></html>"
        book.add_item(item)
        items.append(item)
    book.toc = items
    book.spine = ["nav", *items]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    epub.write_epub(str(path), book)
    return path


def wide_sheet(rows: int, columns: int) -> MemberWriter:
    """A worksheet's XML, streamed: ``rows`` rows of ``columns`` numeric cells each,
    under a stale ``<dimension ref="A1:A1">`` (what a careless writer leaves)."""
    from openpyxl.utils.cell import get_column_letter

    letters = [get_column_letter(c) for c in range(1, columns + 1)]

    def write(out: IO[bytes]) -> None:
        out.write(
            b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
            b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
            b'<dimension ref="A1:A1"/><sheetData>'
        )
        for r in range(1, rows + 1):
            cells = "".join(f'<c r="{x}{r}"><v>{r}</v></c>' for x in letters)
            out.write(f'<row r="{r}">{cells}</row>'.encode())
        out.write(b"</sheetData></worksheet>")

    return write


def deflated_zeros(size: int) -> bytes:
    """``size`` zero bytes deflated (zlib format), compressed a mebibyte at a time."""
    packer = zlib.compressobj(9)
    block = bytes(1 << 20)
    parts = [
        packer.compress(block[: min(len(block), size - done)])
        for done in range(0, size, len(block))
    ]
    parts.append(packer.flush())
    return b"".join(parts)


def _stream_bomb(doc: object, xref: int, size: int) -> None:
    doc.update_stream(xref, deflated_zeros(size), compress=False)  # type: ignore[attr-defined]
    doc.xref_set_key(xref, "Filter", "/FlateDecode")  # type: ignore[attr-defined]


def make_font_bomb_pdf(path: Path, text: str, size: int = 1536 << 20) -> Path:
    """A PDF whose one line of ``text`` is set in an embedded font whose font file
    inflates to ``size`` bytes (MuPDF loads a font file whole)."""
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_font(fontname="F0", fontfile=_a_truetype_font())
    page.insert_text((72, 72), text, fontname="F0", fontsize=12)
    for xref in range(1, doc.xref_length()):
        kind, value = doc.xref_get_key(xref, "FontFile2")
        if kind == "xref":
            _stream_bomb(doc, int(value.split()[0]), size)
    doc.save(str(path))
    return path


def _a_truetype_font() -> str:
    import pymupdf

    # PyMuPDF ships no TrueType file; the Debian fonts are present on every machine here.
    for candidate in (
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ):
        if Path(candidate).is_file():
            return candidate
    raise FileNotFoundError(f"no TrueType font found (pymupdf {pymupdf.__version__})")


def make_profile_bomb_pdf(path: Path, size: int = 1536 << 20) -> Path:
    """A scanned page (no text layer) whose image has an ICC colour profile that
    inflates to ``size`` bytes."""
    import pymupdf

    make_image_pdf(path)
    doc = pymupdf.open(str(path))
    image = doc[0].get_images(full=True)[0][0]
    profile = doc.get_new_xref()
    doc.update_object(profile, "<< /N 3 >>")
    _stream_bomb(doc, profile, size)
    doc.xref_set_key(image, "ColorSpace", f"[/ICCBased {profile} 0 R]")
    doc.save(str(path) + ".tmp")
    doc.close()
    Path(str(path) + ".tmp").replace(path)
    return path


def make_png_profile_bomb(path: Path, size: int = 1536 << 20) -> Path:
    """A PNG of ``OCR_TEXT`` with an iCCP colour profile that inflates to ``size``."""
    png = render_text_png()
    profile = _png_chunk(b"iCCP", b"bomb\x00\x00" + deflated_zeros(size))
    path.write_bytes(png[:33] + profile + png[33:])  # right after IHDR
    return path
