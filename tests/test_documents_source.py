"""A `documents` source end to end: real PDFs, an EPUB and office files built with
their libraries, through Dagster (in-process), LanceDB, Tantivy and the bundled
model: page/slide/chapter anchors in hits, `--type` filters, MCP `open` on a page,
broken files recorded while the rest is indexed, OCR in a deferred pass that never
holds back the text documents, and renames or copies that cost no parse and no
embedding."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from rag_serving.config import RaglineConfig, parse_config_file
from rag_serving.search import SearchEngine, SearchFilters
from rag_serving.status import index_status
from rag_sources.errors import FilterError
from tests.conftest import SHARED_DATA, write_config

pytestmark = pytest.mark.shared_data

PDF = SHARED_DATA / "corpora" / "pdf"
PAPER = PDF / "papers" / "2304.02623v1.pdf"  # 4 pages, an outline
KNOWN_SENTENCE = "instruction-tuned models are merely smart copiers when performing summarization"
OCR_TEXT = "Quarterly harvest ledger: seventeen barrels of cider apples"


def _docx(path: Path) -> None:
    import docx

    document = docx.Document()
    document.core_properties.title = "Field guide"
    document.add_heading("Beekeeping basics", level=1)
    document.add_paragraph("A healthy hive needs a laying queen and enough stored honey.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Month", "Task"
    table.cell(1, 0).text, table.cell(1, 1).text = "April", "Add a super for the nectar flow"
    document.save(str(path))


def _pptx(path: Path) -> None:
    from pptx import Presentation

    deck = Presentation()
    for title, body in (
        ("Roadmap", "Ship the offline search"),
        ("Risks", "The glacier survey may slip to autumn because of snowfall"),
    ):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        slide.notes_slide.notes_text_frame.text = f"Speaker note about {title.lower()}"
    deck.save(str(path))


def _image_only_pdf(path: Path) -> None:
    """A one-page PDF whose only content is a picture of ``OCR_TEXT`` (no text layer)."""
    source = pymupdf.open()
    page = source.new_page(width=612, height=200)
    page.insert_text((40, 100), OCR_TEXT, fontsize=18)
    pixmap = page.get_pixmap(dpi=200)
    scanned = pymupdf.open()
    out = scanned.new_page(width=612, height=200)
    out.insert_image(out.rect, pixmap=pixmap)
    scanned.save(str(path))


def _build_folder(root: Path) -> Path:
    folder = root / "library"
    (folder / "papers").mkdir(parents=True)
    shutil.copy(PAPER, folder / "papers" / "expository.pdf")
    shutil.copy(SHARED_DATA / "corpora" / "epub" / "wasteland.epub", folder / "wasteland.epub")
    _docx(folder / "guide.docx")
    _pptx(folder / "plan.pptx")
    (folder / "page.html").write_text(
        "<html><head><title>Sourdough</title></head><body><nav>menu</nav><main>"
        "<h1>Sourdough starter</h1><p>Feed the starter rye flour every twelve hours.</p>"
        "</main></body></html>",
        encoding="utf-8",
    )
    (folder / "notes.txt").write_text("Plain text about lighthouse keepers.\n", encoding="utf-8")
    _image_only_pdf(folder / "scanned.pdf")
    # broken ones
    shutil.copy(PDF / "real-world" / "password-example.pdf", folder / "locked.pdf")
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "truncated.pdf").write_bytes(PAPER.read_bytes()[:3000])
    (folder / "garbage.docx").write_bytes(b"this is not a zip file at all")
    (folder / "blob.bin").write_bytes(b"\x00\x01\x02")
    return folder


def _run(config: RaglineConfig, deferred: bool = False) -> Any:
    """One run of the indexing job on the partition (the first or the deferred pass)."""
    import os

    from rag_assets.definitions import defs
    from rag_assets.instance import open_instance
    from rag_assets.jobs import INDEX_JOB_NAME
    from rag_assets.partitions import SOURCES_PARTITIONS_NAME

    os.environ["RAGLINE_CONFIG"] = str(config.config_path)
    instance = open_instance(config.data_dir)
    if "library" not in instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME):
        instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, ["library"])
    tags = {"ragline/pass": "deferred"} if deferred else {}
    result = defs.resolve_job_def(INDEX_JOB_NAME).execute_in_process(
        partition_key="library", instance=instance, tags=tags, raise_on_error=False
    )
    assert result.success
    metadata = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        metadata[materialization.asset_key.to_user_string()] = {
            k: getattr(v, "value", v) for k, v in materialization.metadata.items()
        }
    checks = {
        e.event_specific_data.check_name: e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    return metadata, checks


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("documents")
    folder = _build_folder(root)
    config = parse_config_file(
        write_config(root, [{"name": "library", "kind": "documents", "path": str(folder)}])
    )
    first, first_checks = _run(config)
    # Searchable before any OCR ran: everything but the scanned page.
    engine = SearchEngine(config)
    before_ocr = engine.search(KNOWN_SENTENCE, k=3)
    scanned_before = engine.search(OCR_TEXT, k=3, mode="bm25")
    status_before = index_status(config)
    second, _ = _run(config, deferred=True)
    return {
        "root": root,
        "folder": folder,
        "config": config,
        "first": first,
        "first_checks": first_checks,
        "second": second,
        "before_ocr": before_ocr,
        "scanned_before": scanned_before,
        "status_before": status_before,
    }


def test_a_known_sentence_is_found_on_its_page(library: dict[str, Any]) -> None:
    hit = library["before_ocr"].hits[0]
    assert hit.path == "papers/expository.pdf" and hit.file_type == "pdf"
    assert hit.location == "papers/expository.pdf#page=3"
    assert hit.title.startswith("Beyond Summarization")  # from the PDF's metadata
    assert hit.kind == "documents"


def test_hits_show_slide_chapter_and_heading_anchors(library: dict[str, Any]) -> None:
    engine = SearchEngine(library["config"])
    slide = engine.search("glacier survey slips because of snowfall", k=1).hits[0]
    assert slide.location == "plan.pptx#slide=2" and "Risks" in slide.anchor
    docx_hit = engine.search("laying queen stored honey", k=1).hits[0]
    assert docx_hit.path == "guide.docx" and docx_hit.title == "Field guide"
    assert "Beekeeping basics" in docx_hit.anchor
    html_hit = engine.search("feed the starter rye flour", k=1).hits[0]
    assert html_hit.path == "page.html" and html_hit.title == "Sourdough"
    poem = engine.search("April is the cruellest month", k=1).hits[0]
    assert poem.path == "wasteland.epub" and poem.location.startswith("wasteland.epub#chapter=")
    assert poem.anchor  # the chapter's title from the table of contents


def test_type_filters(library: dict[str, Any]) -> None:
    engine = SearchEngine(library["config"])
    for mode in ("hybrid", "bm25", "vector"):
        hits = engine.search(
            "summarization writing support", k=10, mode=mode, filters=SearchFilters(types=("pdf",))
        ).hits
        assert hits and {h.file_type for h in hits} == {"pdf"}
    both = engine.search(
        "hive honey slides roadmap", k=20, filters=SearchFilters(types=("docx", "pptx"))
    ).hits
    assert {h.file_type for h in both} == {"docx", "pptx"}
    with pytest.raises(FilterError, match="no indexed file has type 'pfd'; did you mean 'pdf'"):
        engine.search("x", filters=SearchFilters(types=("pfd",)))


def test_broken_files_are_recorded_and_never_fail_the_source(library: dict[str, Any]) -> None:
    parsed = library["first"]["parsed_documents"]
    assert parsed["failed"] == 3 and parsed["skipped"] == 2
    problems = parsed["problems"]
    for name in ("locked.pdf", "empty.pdf", "truncated.pdf", "garbage.docx", "blob.bin"):
        assert f"`{name}`" in problems
    check = library["first_checks"]["items_indexed"]
    assert not check.passed and check.severity.value == "WARN"
    [source] = index_status(library["config"]).sources
    reasons = {i.path: (i.severity, i.message) for i in source.issues}
    assert reasons["locked.pdf"][0] == "error" and "password" in reasons["locked.pdf"][1]
    assert reasons["empty.pdf"] == ("skipped", reasons["empty.pdf"][1])
    assert reasons["truncated.pdf"][0] == "error"
    assert reasons["garbage.docx"][0] == "error"
    assert reasons["blob.bin"] == (
        "skipped",
        "no parser for this type of file; exclude it with `exclude`",
    )
    assert all("\n" not in message for _, message in reasons.values())
    assert source.documents >= 7  # the good files are all there


def test_ocr_runs_in_a_deferred_pass(library: dict[str, Any]) -> None:
    first = library["first"]["parsed_documents"]
    assert first["deferred_documents"] == 1
    assert library["scanned_before"].hits == [] or all(
        h.path != "scanned.pdf" for h in library["scanned_before"].hits
    )
    pending = [i for i in library["status_before"].sources[0].issues if i.severity == "pending"]
    assert [(i.path, i.message) for i in pending] == [
        ("scanned.pdf", "queued for a later pass: OCR of 1 page (1)")
    ]
    second = library["second"]
    assert second["parsed_documents"]["deferred_documents"] == 0
    assert second["parsed_documents"]["changed"] == 1  # only the scanned file
    engine = SearchEngine(library["config"])
    hit = engine.search("harvest ledger cider apples barrels", k=1).hits[0]
    assert hit.location == "scanned.pdf#page=1"
    doc = engine.store.read("documents", where="path = 'scanned.pdf'").to_pylist()[0]
    assert '"ocr": true' in doc["sections_json"]
    assert not any(
        i.severity == "pending" for i in index_status(library["config"]).sources[0].issues
    )
    assert not library["config"].data_dir.joinpath("deferred", "library").exists()


def test_mcp_open_returns_the_page_a_hit_points_to(library: dict[str, Any]) -> None:
    from rag_serving.mcp.auth import LOCAL_ACCESS
    from rag_serving.mcp.service import RaglineService

    service = RaglineService(library["config"])
    hit = library["before_ocr"].hits[0]
    opened = service.open(LOCAL_ACCESS, id=hit.chunk_id)
    assert opened.anchor == "page=3" and opened.section == "Page 3"
    assert "smart" in opened.text and "copiers" in opened.text
    page_one = service.open(LOCAL_ACCESS, id=hit.doc_id, section="page=1")
    assert page_one.anchor == "page=1" and "Beyond Summarization" in page_one.text
    assert opened.file_type == "pdf"


def test_a_renamed_or_copied_pdf_is_neither_parsed_nor_embedded(library: dict[str, Any]) -> None:
    folder, config = library["folder"], library["config"]
    (folder / "papers" / "expository.pdf").rename(folder / "papers" / "renamed.pdf")
    shutil.copy(folder / "papers" / "renamed.pdf", folder / "copy.pdf")
    metadata, _ = _run(config)
    parsed, chunks = metadata["parsed_documents"], metadata["chunks"]
    assert parsed["new"] == 2 and parsed["deleted"] == 1
    assert parsed["reused_parses"] == 2
    assert chunks["reused_chunkings"] == 2
    assert metadata["embeddings"]["embedded"] == 0
    hits = SearchEngine(config).search(KNOWN_SENTENCE, k=2).hits
    assert {h.location for h in hits} == {"papers/renamed.pdf#page=3", "copy.pdf#page=3"}


def test_a_new_parser_version_reparses_only_its_type(
    library: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_sources.formats import router

    monkeypatch.setitem(router.PARSER_VERSIONS, "pptx", "pptx/99")
    metadata, _ = _run(library["config"])
    parsed = metadata["parsed_documents"]
    assert parsed["changed"] == 1 and parsed["new"] == 0
    assert metadata["embeddings"]["embedded"] == 0  # same text, same vectors


def test_cli_and_mcp_filter_by_type_and_show_locations(library: dict[str, Any]) -> None:
    import json

    from click.testing import CliRunner

    from rag_serving.mcp.auth import LOCAL_ACCESS
    from rag_serving.mcp.search import SearchRequest
    from rag_serving.mcp.service import RaglineService
    from ragline.cli import cli

    config_path = str(library["config"].config_path)
    result = CliRunner().invoke(
        cli, ["--config", config_path, "search", "roadmap risks", "--type", "pptx", "--json"]
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)["hits"]
    assert hits and {h["file_type"] for h in hits} == {"pptx"}
    assert all(h["location"].startswith("plan.pptx#slide=") for h in hits)
    text = CliRunner().invoke(cli, ["--config", config_path, "search", "glacier survey", "-k", "1"])
    assert "at plan.pptx#slide=2" in text.output
    wrong = CliRunner().invoke(cli, ["--config", config_path, "search", "x", "--type", "docxx"])
    assert wrong.exit_code == 2 and "did you mean 'docx'" in wrong.output

    service = RaglineService(library["config"])
    output = service.search(LOCAL_ACCESS, SearchRequest(query="cruellest month", types=("epub",)))
    assert output.filters == {"types": ["epub"]}
    assert output.hits and output.hits[0].location.startswith("wasteland.epub#chapter=")
    status = service.status(LOCAL_ACCESS)
    [source] = status.sources
    assert {i.path for i in source.errors} == {"locked.pdf", "truncated.pdf", "garbage.docx"}
    assert {i.path for i in source.skipped} == {"empty.pdf", "blob.bin"}
    assert source.pending == []
