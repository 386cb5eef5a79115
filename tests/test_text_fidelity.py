"""What is indexed is what the user reads (issue 27, items 1, 3, 4 and 15).

Text layers whose fonts map glyphs to no Unicode (U+FFFD, private-use or control
characters) are kept out of the index and read by OCR where they stand; Arabic in
presentation forms, ligatures and full-width letters are searched as typed; an
XFA-only form is indexed as its form, not as its "Please wait…" page; snippets mark
the words that carry a query, not its stop words.

PDFs are built here with PyMuPDF the way broken producers write them (an embedded
font whose ToUnicode map is missing or points into the private-use area, Arabic set
glyph by glyph in presentation forms, an XFA stream) or read from ../shared/data
(a Redbook page with a sidebar in an unmapped font, a Korean report, a right-to-left
Arabic page). OCR runs the real Tesseract; the index is built by the real pipeline.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pymupdf
import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.index.analysis import analyze, fold_compatibility, is_stop_word
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.search import SearchEngine
from rag_sources.errors import IndexNeedsUpgradeError
from rag_sources.formats.model import ItemSkipped, ParsedDocument, ParseOptions
from rag_sources.formats.router import file_type, parse_file
from rag_sources.formats.text import UNREADABLE, text_quality, without_unreadable
from tests.conftest import SHARED_DATA, build_index, write_config

PDF_ROOT = SHARED_DATA / "corpora" / "pdf"
DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")  # Debian fonts-dejavu-core
FIRST_PASS = ParseOptions(allow_deferred_work=False)
DEFERRED_PASS = ParseOptions()
OCR_OFF = ParseOptions(ocr="off")

INTRO = "Survey of behaviour models in health psychology"
GARBLED = [
    "Theory of Reasoned Action predicts behaviour from intentions",
    "Attitudes and subjective norms shape every intention",
]
# Arabic set glyph by glyph in presentation forms, as pdf.js' ArabicCIDTrueType.pdf:
# "سلام كتاب السلام" (peace, book, the peace; a lam-alef ligature in the last word).
ARABIC_FORMS = "ﺳﻠﺎﻡ ﻛﺘﺎﺏ ﺍﻟﺴﻼﻡ"
XFA_TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<xdp:xdp xmlns:xdp="http://ns.adobe.com/xdp/">
<template xmlns="http://www.xfa.org/schema/xfa-template/3.3/">
  <subform name="claim">
    <draw name="heading"><value><text>Travel expense claim</text></value></draw>
    <field name="EmployeeName">
      <caption><value><text>Employee name</text></value></caption>
      <assist><toolTip>Full name as on the payroll</toolTip></assist>
    </field>
    <draw name="notice"><value><exData contentType="text/html">
      <body xmlns="http://www.w3.org/1999/xhtml"><p>Receipts older than ninety days
      are refunded at the <b>manager's</b> discretion.</p></body>
    </exData></value></draw>
    <field name="Total"><event activity="click"><script>app.alert("total")</script></event>
      <caption><value><text>Total amount</text></value></caption></field>
  </subform>
</template>
<xfa:datasets xmlns:xfa="http://www.xfa.org/schema/xfa-data/1.0/">
  <xfa:data><claim><EmployeeName>Ada Lovelace</EmployeeName><Total>1843.50</Total></claim>
  </xfa:data>
</xfa:datasets>
</xdp:xdp>
"""
PLEASE_WAIT = (
    "Please wait... If this message is not eventually replaced by the proper contents "
    "of the document, your PDF viewer may not be able to display this type of document. "
    "You can upgrade to the latest version of Adobe Reader for Windows, Mac, or Linux."
)


def parse(path: Path, options: ParseOptions = DEFERRED_PASS) -> ParsedDocument:
    type_name = file_type(path.name)
    assert type_name is not None, path
    return parse_file(path, path.name, type_name, options)


def words(text: str) -> str:
    return " ".join(text.lower().split())


# ---- building PDFs as broken producers write them ------------------------------------


def unmapped_pdf(path: Path, garbled: list[str], intro: str = "", to_unicode: str = "") -> Path:
    """One page per string of ``garbled``, set in an embedded font whose ToUnicode map
    is removed (MuPDF then gives U+FFFD for every glyph) or, with ``to_unicode``,
    replaced by that CMap; ``intro`` in Helvetica above it on the first page."""
    doc = pymupdf.open()
    for number, text in enumerate(garbled):
        page = doc.new_page()
        if intro and number == 0:
            page.insert_text((72, 72), intro, fontname="helv", fontsize=12)
        page.insert_font(fontname="F1", fontbuffer=pymupdf.Font("cjk").buffer)
        page.insert_text((72, 120), text, fontname="F1", fontsize=14)
    for xref in {f[0] for page in doc for f in page.get_fonts(full=True) if f[4] == "F1"}:
        if to_unicode:
            stream = doc.get_new_xref()
            doc.update_object(stream, "<<>>")
            doc.update_stream(stream, to_unicode.encode())
            doc.xref_set_key(xref, "ToUnicode", f"{stream} 0 R")
        else:
            doc.xref_set_key(xref, "ToUnicode", "null")
    doc.save(str(path), garbage=3)
    return path


# Every glyph id below 0x200 mapped into the private-use area (as symbol-font
# producers do): text that extracts as U+E000… instead of letters.
PRIVATE_USE_CMAP = """/CIDInit /ProcSet findresource begin 12 dict begin begincmap
/CMapName /Private def 1 begincodespacerange <0000> <FFFF> endcodespacerange
2 beginbfrange <0000> <00FF> <E000> <0100> <01FF> <E100> endbfrange
endcmap CMapName currentdict /CMap defineresource pop end end"""


def arabic_forms_pdf(path: Path) -> Path:
    """Arabic drawn glyph by glyph in presentation forms (visual order, as PDF
    producers draw right-to-left text), with an English line."""
    if not DEJAVU.is_file():
        pytest.fail(f"{DEJAVU} is missing: apt-get install fonts-dejavu-core")
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_font(fontname="F1", fontfile=str(DEJAVU))
    page.insert_text((72, 72), ARABIC_FORMS[::-1], fontname="F1", fontsize=14)
    page.insert_text((72, 100), "Library catalogue, Arabic shelf", fontname="helv", fontsize=11)
    doc.save(str(path))
    return path


def xfa_pdf(path: Path, xdp: str, page_text: str, needs_rendering: bool = True) -> Path:
    """A PDF whose interactive form is the XFA ``xdp`` (one stream) and whose page
    shows ``page_text``."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_textbox(pymupdf.Rect(72, 72, 540, 400), page_text, fontsize=11)
    stream = doc.get_new_xref()
    doc.update_object(stream, "<<>>")
    doc.update_stream(stream, xdp.encode())
    form = doc.get_new_xref()
    doc.update_object(form, f"<< /Fields [] /XFA {stream} 0 R >>")
    catalog = doc.pdf_catalog()
    doc.xref_set_key(catalog, "AcroForm", f"{form} 0 R")
    if needs_rendering:
        doc.xref_set_key(catalog, "NeedsRendering", "true")
    doc.save(str(path))
    return path


def require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"shared data not found at {path}; deselect with -m 'not shared_data'")
    return path


# ---- the shared check ----------------------------------------------------------------


def test_text_quality_counts_what_is_not_text() -> None:
    quality = text_quality("Ab\ufffd \uf0a7c\x03\u0085\n\U000f0854")
    assert (quality.chars, quality.unreadable, quality.private_use) == (8, 5, 2)
    assert quality.lost == 3
    assert without_unreadable("a\ufffdb\uf0fc c\x00\td\n") == "ab c\td\n"
    assert not UNREADABLE.search("Café ﬁ 機械 حَبيبي — “quoted” 😀")


# ---- item 1: text layers without a Unicode map ---------------------------------------


def test_unmapped_text_is_left_out_and_named_when_ocr_is_off(tmp_path: Path) -> None:
    pdf = unmapped_pdf(tmp_path / "tam-review.pdf", GARBLED, intro=INTRO)
    doc = parse(pdf, OCR_OFF)
    assert not UNREADABLE.search(doc.body), doc.body
    assert INTRO in doc.body
    assert [s.anchor for s in doc.sections] == ["page=1"]  # page 2 held no text at all
    (warning,) = doc.warnings
    assert re.search(r"^\d{2,} unreadable characters on pages 1-2 \(font ", warning), warning
    assert "without a Unicode map" in warning and warning.endswith("OCR is off for this source")


def test_private_use_text_layer_is_left_out_too(tmp_path: Path) -> None:
    pdf = unmapped_pdf(tmp_path / "symbols.pdf", GARBLED, intro=INTRO, to_unicode=PRIVATE_USE_CMAP)
    raw = pymupdf.open(pdf)[0].get_text()
    assert re.search("[\ue000-\uf8ff]{10}", raw)  # the text layer really is private-use
    doc = parse(pdf, ParseOptions(ocr_languages=("tlh",)))  # no Tesseract data: no OCR
    assert not UNREADABLE.search(doc.body) and INTRO in doc.body
    (warning,) = doc.warnings
    assert "unreadable characters on pages 1-2" in warning
    assert "OCR unavailable: no Tesseract data for tlh" in warning


def test_a_pdf_with_no_readable_text_says_why(tmp_path: Path) -> None:
    pdf = unmapped_pdf(tmp_path / "thuluth.pdf", GARBLED)
    with pytest.raises(ItemSkipped, match=r"^no readable text: \d+ unreadable characters") as info:
        parse(pdf, OCR_OFF)
    assert "OCR is off for this source" in str(info.value)


def test_unmapped_lines_are_ocrd_where_they_stand_in_the_deferred_pass(tmp_path: Path) -> None:
    pdf = unmapped_pdf(tmp_path / "tam-review.pdf", GARBLED, intro=INTRO)
    first = parse(pdf, FIRST_PASS)
    assert first.deferred == ("OCR of 2 pages (1-2)",)
    assert first.warnings == () and not UNREADABLE.search(first.body)
    assert INTRO in first.body
    done = parse(pdf, DEFERRED_PASS)
    assert done.deferred == () and done.warnings == ()
    assert not UNREADABLE.search(done.body)
    text = words(done.body)
    assert "theory of reasoned action predicts behaviour" in text, done.body
    assert "subjective norms" in text
    assert text.index(INTRO.lower()) < text.index("theory of reasoned")  # where it stood
    assert [(s.anchor, s.ocr) for s in done.sections] == [("page=1", True), ("page=2", True)]
    assert done.metadata["ocr_pages"] == [1, 2]


@pytest.mark.shared_data
def test_a_real_sidebar_without_unicode_map_is_ocrd() -> None:
    # The Redbook's "Highlights" sidebar (page 3) is set in a CID font without a
    # ToUnicode map: 286 U+FFFD were indexed, its words nowhere.
    pdf = require(PDF_ROOT / "docling-samples" / "redp5110_sampled.pdf")
    first = parse(pdf, FIRST_PASS)
    assert first.deferred == ("OCR of 1 page (3)",)
    assert not UNREADABLE.search(first.body) and first.warnings == ()
    done = parse(pdf, DEFERRED_PASS)
    assert done.metadata["ocr_pages"] == [3]
    page = next(s for s in done.sections if s.anchor == "page=3")
    text = words("\n".join(done.body.split("\n")[page.line_start - 1 : page.line_end]))
    for phrase in ("enhance the performance", "modernization", "worldwide source"):
        assert phrase in text, text
    assert "global coe engagements cover topics" in text  # the text layer's own lines stay


@pytest.mark.shared_data
def test_ocr_is_not_used_for_a_script_its_languages_cannot_read() -> None:
    # Korean headings in a font without a map: OCR with "eng" would index Latin junk.
    pdf = require(PDF_ROOT / "docling-samples" / "skipped_1page.pdf")
    doc = parse(pdf, FIRST_PASS)
    assert doc.deferred == () and not UNREADABLE.search(doc.body)
    (warning,) = doc.warnings
    assert "unreadable characters on page 2" in warning
    assert "ocr_languages (eng) do not read Hangul (Tesseract's kor)" in warning


def test_ocr_renders_no_more_pixels_than_the_cap(tmp_path: Path) -> None:
    # The OCR device was given its area already in pixels and scaled it again: a page
    # within [limits] max_image_pixels was rendered with zoom² times the pixels (7.7×
    # at 200 dpi; 102 MB more peak memory here for a 4 Mpx page, now 21 MB).
    side = 10 * 72
    source = pymupdf.open()
    page = source.new_page(width=side, height=side)
    page.insert_textbox(
        pymupdf.Rect(36, 36, side - 36, side - 36), "Harbour log " * 30, fontsize=24
    )
    scan = page.get_pixmap(dpi=100, colorspace=pymupdf.csGRAY)
    scanned = pymupdf.open()
    out = scanned.new_page(width=side, height=side)
    out.insert_image(out.rect, stream=scan.tobytes("png"))
    scanned.save(str(tmp_path / "scan.pdf"))
    code = f"""
        import json, resource
        from pathlib import Path
        import rag_sources.formats.pdf
        from rag_sources.formats.model import options_for
        from rag_sources.formats.router import parse_file
        from rag_sources.limits import Limits
        options = options_for(Limits(max_image_pixels=4_000_000))  # 200 dpi: 2000 × 2000
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        doc = parse_file(Path({str(tmp_path / "scan.pdf")!r}), "scan.pdf", "pdf", options)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(json.dumps({{"kib": grown, "body": doc.body, "warnings": doc.warnings}}))
    """
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert "harbour log" in result["body"].lower() and result["warnings"] == []
    assert result["kib"] < 48 * 1024, result["kib"]  # 12 bytes per pixel of the cap


# ---- item 3: compatibility characters --------------------------------------------------


def test_compatibility_forms_are_analysed_as_their_letters() -> None:
    assert fold_compatibility(ARABIC_FORMS) == "سلام كتاب السلام"
    assert analyze(ARABIC_FORMS) == analyze("سلام كتاب السلام")
    assert analyze("ＲＡＧＬＩＮＥ ①st ﬁnancial H₂O") == analyze("RAGLINE 1st financial H2O")


def test_presentation_forms_stay_in_the_text_shown(tmp_path: Path) -> None:
    doc = parse(arabic_forms_pdf(tmp_path / "shelf.pdf"))
    assert ARABIC_FORMS in doc.body  # the text as the file holds it


@pytest.mark.shared_data
def test_right_to_left_ligatures_keep_their_letters_in_order() -> None:
    # MuPDF reversed the two letters of each lam-alef glyph: "اإلنتاجية" for الإنتاجية.
    doc = parse(require(PDF_ROOT / "docling-samples" / "right_to_left_01.pdf"), FIRST_PASS)
    for word in ("الإنتاجية", "المشكلات", "الأدوات", "خلال"):
        assert word in doc.body, word
    assert "اإلنتاجية" not in doc.body and "المشكالت" not in doc.body


# ---- item 4: XFA-only forms ------------------------------------------------------------


def test_an_xfa_only_form_is_indexed_as_its_form(tmp_path: Path) -> None:
    doc = parse(xfa_pdf(tmp_path / "claim.pdf", XFA_TEMPLATE, PLEASE_WAIT))
    assert "please wait" not in doc.body.lower()
    for text in (
        "Travel expense claim",
        "Employee name",
        "Full name as on the payroll",
        "Receipts older than ninety days are refunded at the manager's discretion.",
        "Total amount",
        "EmployeeName: Ada Lovelace",
        "Total: 1843.50",
    ):
        assert text in doc.body, text
    assert "app.alert" not in doc.body  # scripts are not text
    assert doc.metadata["xfa"] is True
    (warning,) = doc.warnings
    assert warning.startswith("XFA form: its pages hold only") and "Please wait" in warning


def test_an_xfa_form_is_known_by_its_placeholder_page_too(tmp_path: Path) -> None:
    pdf = xfa_pdf(tmp_path / "claim.pdf", XFA_TEMPLATE, PLEASE_WAIT, needs_rendering=False)
    doc = parse(pdf)
    assert "Travel expense claim" in doc.body and "please wait" not in doc.body.lower()


def test_an_xfa_form_without_text_is_skipped_with_the_reason(tmp_path: Path) -> None:
    empty = '<xdp:xdp xmlns:xdp="http://ns.adobe.com/xdp/"><template/></xdp:xdp>'
    with pytest.raises(ItemSkipped, match=r"^XFA form: its pages hold only") as info:
        parse(xfa_pdf(tmp_path / "empty.pdf", empty, PLEASE_WAIT))
    assert "Adobe Acrobat" in str(info.value)


def test_a_form_whose_pages_are_its_content_is_read_from_its_pages(tmp_path: Path) -> None:
    # A "static" XFA form: the pages are real, the XFA rides along.
    page = "Vehicle registration renewal. Owner signature and plate number below."
    doc = parse(xfa_pdf(tmp_path / "static.pdf", XFA_TEMPLATE, page, needs_rendering=False))
    assert "Vehicle registration renewal" in doc.body and "Travel expense" not in doc.body
    assert doc.warnings == ()


# ---- the pipeline: search finds what the pages say ------------------------------------


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    folder = tmp_path_factory.mktemp("fidelity-library")
    # All text in the unmapped font, as pdf.js' TAMReview.pdf (83 % U+FFFD indexed).
    # (With readable pages too, the deferred pass's OCR'd lines do not reach the
    # chunks yet: the chunk stage keys on the file's hash, not on the parse.)
    unmapped_pdf(folder / "tam-review.pdf", GARBLED)
    arabic_forms_pdf(folder / "shelf.pdf")
    shutil.copy(require(PDF_ROOT / "docling-samples" / "right_to_left_01.pdf"), folder / "rtl.pdf")
    xfa_pdf(folder / "claim.pdf", XFA_TEMPLATE, PLEASE_WAIT)
    (folder / "ledger.txt").write_text(
        "Quarterly ﬁnancial ledger for ＲＡＧＬＩＮＥ: cash ﬂow was positive.\n"
        "Bought one ｺﾝﾋﾟｭｰﾀ and 12 ㎏ of paper.\n"  # half-width katakana, a unit sign
    )
    (folder / "habits.txt").write_text(
        "The theory of planned behaviour is one of the models of the habits of the mind.\n"
    )
    (folder / "chansons.txt").write_text(
        "Les chansons de la montagne et les mélodies des villages sont chantées le soir.\n"
    )
    root = tmp_path_factory.mktemp("fidelity-index")
    return build_index(
        write_config(root, [{"name": "library", "kind": "documents", "path": str(folder)}])
    )


@pytest.fixture(scope="module")
def engine(library: RaglineConfig) -> SearchEngine:
    return SearchEngine(library)


def bm25(engine: SearchEngine, query: str) -> list[str]:
    return [hit.path for hit in engine.search(query, k=5, mode="bm25").hits]


@pytest.mark.shared_data
def test_search_finds_the_ocrd_words_and_never_shows_replacement_characters(
    engine: SearchEngine,
) -> None:
    result = engine.search("Theory of Reasoned Action", k=5, mode="bm25")
    assert result.hits[0].path == "tam-review.pdf"
    for hit in result.hits:
        assert not UNREADABLE.search(hit.snippet), hit.snippet
    assert "**Reasoned**" in result.hits[0].snippet


@pytest.mark.shared_data
def test_normally_typed_arabic_finds_presentation_forms_and_ligatures(
    engine: SearchEngine,
) -> None:
    assert bm25(engine, "كتاب")[:1] == ["shelf.pdf"]
    assert bm25(engine, "السلام")[:1] == ["shelf.pdf"]
    assert bm25(engine, "المشكلات")[:1] == ["rtl.pdf"]
    assert bm25(engine, "الإنتاجية")[:1] == ["rtl.pdf"]


@pytest.mark.shared_data
def test_ligatures_and_full_width_letters_are_found_by_their_letters(
    engine: SearchEngine,
) -> None:
    assert bm25(engine, "financial flow")[:1] == ["ledger.txt"]
    assert bm25(engine, "ragline ledger")[:1] == ["ledger.txt"]
    assert bm25(engine, "ＲＡＧＬＩＮＥ")[:1] == ["ledger.txt"]  # a full-width query too
    assert bm25(engine, "コンピュータ")[:1] == ["ledger.txt"]  # typed in full-width kana
    assert bm25(engine, "12 kg paper")[:1] == ["ledger.txt"]


@pytest.mark.shared_data
def test_the_xfa_form_is_found_by_its_fields(engine: SearchEngine) -> None:
    assert bm25(engine, "travel expense claim Lovelace")[:1] == ["claim.pdf"]
    assert bm25(engine, "adobe reader viewer") == []  # the placeholder was not indexed


# ---- item 15: snippets mark the words that matter --------------------------------------


def marked(snippet: str) -> list[str]:
    return [m.lower() for m in re.findall(r"\*\*(.+?)\*\*", snippet)]


@pytest.mark.shared_data
def test_snippets_do_not_mark_stop_words(engine: SearchEngine) -> None:
    hit = engine.search("the theory of habits", k=1, mode="bm25").hits[0]
    assert hit.path == "habits.txt"
    assert set(marked(hit.snippet)) == {"theory", "habits"}, hit.snippet
    french = engine.search("les chansons de la montagne", k=1, mode="bm25").hits[0]
    assert french.path == "chansons.txt"
    assert set(marked(french.snippet)) == {"chansons", "montagne"}, french.snippet


@pytest.mark.shared_data
def test_a_query_of_stop_words_only_still_marks_them(engine: SearchEngine) -> None:
    hit = engine.search("of the", k=5, mode="bm25").hits[0]
    assert set(marked(hit.snippet)) >= {"of"} or set(marked(hit.snippet)) >= {"the"}


def test_stop_words_follow_the_chunks_language() -> None:
    assert is_stop_word("The") and is_stop_word("of")
    assert not is_stop_word("les") and is_stop_word("les", "text_fr")
    assert is_stop_word("und", "text_de") and not is_stop_word("und")
    assert not is_stop_word("the", "text_none")  # "none": no language, every word counts
    assert is_stop_word("и")  # Russian's, in every field


# ---- the analysis version: old indexes are rebuilt, not silently mismatched -------------


@pytest.mark.shared_data
def test_an_index_of_the_previous_analysis_is_rebuilt_by_the_next_run(
    tmp_path: Path, library: RaglineConfig
) -> None:
    shutil.copytree(library.data_dir, tmp_path / "data")
    text = Path(library.config_path or "").read_text()
    (tmp_path / "ragline.toml").write_text(
        text.replace(str(library.data_dir), str(tmp_path / "data"))
    )
    config = parse_config_file(tmp_path / "ragline.toml")
    layout = IndexLayout(config.data_dir)
    active = read_manifest(layout.manifest_path).active
    assert active is not None
    stamp = layout.fulltext_dir(active.key) / "ragline-fulltext.json"
    stamp.write_text(json.dumps({"version": 8}))  # written before NFKC folding
    with pytest.raises(IndexNeedsUpgradeError, match="run `ragline index` to rebuild"):
        SearchEngine(config)
    build_index(tmp_path / "ragline.toml")
    assert bm25(SearchEngine(config), "كتاب")[:1] == ["shelf.pdf"]
