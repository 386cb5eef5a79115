"""Real documents built inside the tests: DOCX, PPTX, XLSX, image-only PDF, PNG.

Each builder writes a file with the library that reads it back in production
(python-docx, python-pptx, openpyxl, PyMuPDF), so the parsers see genuine files.
"""

from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path

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
