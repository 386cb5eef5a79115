"""Hostile documents (issue 26 items 4, 6, 7, 12 and their siblings) for
``benchmarks/hostile_inputs.py``, at the sizes the issue measured.

Each case writes one hostile file beside two good documents (a DOCX and an HTML
page) into ``<folder>/docs`` and returns a ``documents`` source over it. The files
are built with the libraries that read them (or byte by byte where the point is a
forged header), streamed, so that writing a gigabyte-sized bomb never holds it:
see tests/format_fixtures.py, which the tests share.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from benchmarks.hostile import HostileCase, HttpFixture
from tests.format_fixtures import (
    forge_declared_size,
    make_docx,
    make_epub,
    make_font_bomb_pdf,
    make_png_bomb,
    make_png_profile_bomb,
    make_pptx,
    make_xlsx,
    pad_before,
    rewrite_zip,
    wide_sheet,
)

GIB = 1 << 30


def _folder(folder: Path) -> tuple[Path, dict[str, Any]]:
    """``folder/docs`` with the two good documents, and the source over it."""
    docs = folder / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    make_docx(docs / "handbook.docx")
    (docs / "sourdough.html").write_text(
        "<html><head><title>Sourdough</title></head><body><main><h1>Sourdough starter</h1>"
        "<p>Feed the starter rye flour every twelve hours.</p></main></body></html>"
    )
    return docs, {"kind": "documents", "path": str(docs)}


def png_30000(folder: Path, http: HttpFixture) -> dict[str, Any]:
    docs, source = _folder(folder)
    make_png_bomb(docs / "poster.png", 30_000, 30_000)  # 109 kB, 900 Mpx
    return source


def pdf_200_inch_page(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """One 200 × 200 inch page (PDF's largest) showing only a scan: at the OCR's
    200 dpi that is 1.6 Gpx (18.4 GB measured); within the cap it is read at 50 dpi."""
    import pymupdf

    docs, source = _folder(folder)
    side = 200 * 72
    drawn = pymupdf.open()
    page = drawn.new_page(width=side, height=side)
    lines = "\n".join(f"Regatta poster, line {n}: harbour master log" for n in range(1, 9))
    page.insert_textbox(pymupdf.Rect(side * 0.04, side * 0.04, side * 0.96, side * 0.96),
                        lines, fontsize=side / 30)  # fmt: skip
    scan = page.get_pixmap(dpi=24, colorspace=pymupdf.csGRAY)  # 4,800 × 4,800
    scanned = pymupdf.open()
    out = scanned.new_page(width=side, height=side)
    out.insert_image(out.rect, stream=scan.tobytes("png"))
    scanned.save(str(docs / "poster.pdf"), deflate=True)
    return source


def tiff_many_frames(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """A TIFF of 2,000 small blank frames: only the first 500 are read."""
    from PIL import Image

    docs, source = _folder(folder)
    frame = Image.new("1", (64, 64), 1)
    frame.save(docs / "fax.tiff", save_all=True, append_images=[frame] * 1_999,
               compression="group4")  # fmt: skip
    return source


def _padded_package(builder: Any, path: Path, member: str, marker: bytes, pad: int) -> Path:
    good = builder(path.with_name(f"source-{path.name}"))
    with zipfile.ZipFile(good) as package:
        data = package.read(member)
    rewrite_zip(good, path, {member: pad_before(data, marker, pad)})
    good.unlink()
    return path


def epub_bomb(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """An EPUB of ~1 MB whose one chapter inflates to ~1 GB of spaces (the issue's
    973 kB book took 5.8 GB: the chapter, its text and its DOM)."""
    docs, source = _folder(folder)

    def book(path: Path) -> Path:
        return make_epub(path, [("Harbour", "<p>The harbour master logs every ship.</p>")])

    _padded_package(book, docs / "bomb.epub", "EPUB/chapter1.xhtml", b"</body>", GIB)
    return source


def docx_bomb(folder: Path, http: HttpFixture) -> dict[str, Any]:
    docs, source = _folder(folder)
    _padded_package(make_docx, docs / "bomb.docx", "word/document.xml", b"</w:body>", GIB)
    return source


def pptx_bomb(folder: Path, http: HttpFixture) -> dict[str, Any]:
    docs, source = _folder(folder)
    _padded_package(make_pptx, docs / "bomb.pptx", "ppt/slides/slide1.xml", b"</p:sld>", GIB)
    return source


def docx_lying_header(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """document.xml declares 1,000 bytes (and the CRC of those), holds 1.5 GB: zipfile
    returns the 1,000 bytes without complaint after inflating everything in one call."""
    docs, source = _folder(folder)
    bomb = _padded_package(
        make_docx, docs / "liar.docx", "word/document.xml", b"</w:body>", 1536 << 20
    )
    forge_declared_size(bomb, "word/document.xml", 1000)
    return source


def docx_many_members(folder: Path, http: HttpFixture) -> dict[str, Any]:
    docs, source = _folder(folder)
    good = make_docx(docs / "source.docx")
    extra: dict[str, Any] = {f"extra/part{i}.xml": b"<a/>" for i in range(20_000)}
    rewrite_zip(good, docs / "crowded.docx", extra)
    good.unlink()
    return source


def xlsx_16384_columns(folder: Path, http: HttpFixture) -> dict[str, Any]:
    """300 rows of 16,384 cells (Excel's widest) under a stale ``<dimension
    ref="A1:A1">``: 128 MiB of sheet XML in 13 MB."""
    docs, source = _folder(folder)
    good = make_xlsx(docs / "source.xlsx", data_rows=3)
    sheet = {"xl/worksheets/sheet1.xml": wide_sheet(300, 16_384)}
    rewrite_zip(good, docs / "wide.xlsx", sheet)
    good.unlink()
    return source


def html_200k_divs(folder: Path, http: HttpFixture) -> dict[str, Any]:
    docs, source = _folder(folder)
    depth = 200_000
    (docs / "deep.html").write_text(
        "<html><body>" + "<div>x" * depth + "</div>" * depth + "</body></html>"
    )
    return source


def pdf_font_bomb(folder: Path, http: HttpFixture) -> dict[str, Any]:
    docs, source = _folder(folder)
    make_font_bomb_pdf(docs / "font.pdf", "Harbour master log", size=1536 << 20)
    return source


def png_profile_bomb(folder: Path, http: HttpFixture) -> dict[str, Any]:
    docs, source = _folder(folder)
    make_png_profile_bomb(docs / "profile.png", size=1536 << 20)
    return source


CASES = [
    HostileCase("PNG 30,000 × 30,000, 109 kB", 4, png_30000, "max_image_pixels", good_items=2),
    HostileCase(
        "PDF with one 200-inch page (a scan)", 4, pdf_200_inch_page, "max_image_pixels",
        good_items=3,
    ),
    HostileCase("TIFF of 2,000 frames", 4, tiff_many_frames, "frames are read", good_items=2),
    HostileCase("EPUB ~1 MB unpacking to 1 GiB", 6, epub_bomb, "max_unpack_ratio", good_items=2),
    HostileCase("DOCX ~1 MB unpacking to 1 GiB", 6, docx_bomb, "max_unpack_ratio", good_items=2),
    HostileCase("PPTX ~1 MB unpacking to 1 GiB", 6, pptx_bomb, "max_unpack_ratio", good_items=2),
    HostileCase(
        "DOCX whose zip header declares 1 kB of a 1.5 GiB member", 6, docx_lying_header,
        "size its header declares", good_items=2,
    ),
    HostileCase("DOCX with 20,000 zip members", 6, docx_many_members, "members", good_items=2),
    HostileCase("HTML with 200,000 nested divs", 7, html_200k_divs, "max_nesting_depth",
                good_items=3),
    HostileCase(
        "XLSX of 16,384 columns under a stale A1:A1 dimension", 12, xlsx_16384_columns,
        "max_sheet_columns", good_items=3,
    ),
    HostileCase(
        "PDF whose embedded font inflates to 1.5 GiB", 6, pdf_font_bomb, "embedded font",
        good_items=3,
    ),
    HostileCase(
        "PNG whose colour profile inflates to 1.5 GiB", 6, png_profile_bomb, "colour profile",
        good_items=3,
    ),
]  # fmt: skip
