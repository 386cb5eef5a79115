"""PDFs inside a Markdown vault are indexed with the document parsers (on by default)
and a note's links to them are in the link graph, so `neighbors` reaches them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pymupdf
import pytest

from rag_serving.mcp.auth import LOCAL_ACCESS
from rag_serving.mcp.service import RaglineService
from rag_serving.search import SearchEngine, SearchFilters
from rag_sources.scanning import iter_source_files
from tests.conftest import SHARED_DATA, build_index, write_config

pytestmark = pytest.mark.shared_data


def _text_pdf(path: Path, text: str) -> None:
    document = pymupdf.open()
    document.new_page().insert_text((72, 72), text, fontsize=12)
    document.save(str(path))


@pytest.fixture(scope="module")
def vault_index(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("attachments")
    vault = root / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "docs").mkdir()
    shutil.copy(
        SHARED_DATA / "corpora" / "pdf" / "papers" / "2304.02623v1.pdf", vault / "paper.pdf"
    )
    _text_pdf(vault / "docs" / "report.pdf", "The orchard report counts pear trees by variety.")
    (vault / "screenshot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (vault / "Reading list.md").write_text(
        "# Reading list\n\n![[paper.pdf]]\n\nAlso [the orchard report](docs/report.pdf).\n",
        encoding="utf-8",
    )
    config_path = write_config(root, [{"name": "vault", "kind": "markdown", "path": str(vault)}])
    return build_index(config_path), vault


def test_pdfs_of_a_vault_are_indexed_and_images_are_not_by_default(vault_index) -> None:
    config, _ = vault_index
    docs = SearchEngine(config).store.read("documents", columns=["path", "kind", "file_type"])
    assert sorted((d["path"], d["file_type"]) for d in docs.to_pylist()) == [
        ("Reading list.md", "md"),
        ("docs/report.pdf", "pdf"),
        ("paper.pdf", "pdf"),
    ]
    hits = (
        SearchEngine(config)
        .search("pear trees by variety", k=3, filters=SearchFilters(types=("pdf",)))
        .hits
    )
    assert hits[0].location == "docs/report.pdf#page=1" and hits[0].kind == "markdown"
    notes_only = config.sources[0].model_copy(update={"attachments": []})
    assert [s.path for s in iter_source_files(notes_only)] == ["Reading list.md"]
    with_images = config.sources[0].model_copy(update={"attachments": ["pdf", "png"]})
    assert "screenshot.png" in {s.path for s in iter_source_files(with_images)}


def test_neighbors_reaches_linked_pdfs_both_ways(vault_index) -> None:
    config, _ = vault_index
    service = RaglineService(config)
    note = service.neighbors(LOCAL_ACCESS, source="vault", path="Reading list.md")
    assert [e.resolved.path for e in note.embeds if e.resolved] == ["paper.pdf"]
    assert [link.resolved.path for link in note.links if link.resolved] == ["docs/report.pdf"]
    paper = service.neighbors(LOCAL_ACCESS, source="vault", path="paper.pdf")
    assert [b.source_note.path for b in paper.backlinks] == ["Reading list.md"]
    assert paper.note.title.startswith("Beyond Summarization")
