"""BM25 document rows (issue 14, item 2): a note's chunks score together, as
whole-document BM25 does, and the rows follow every change of their chunks."""

from __future__ import annotations

from pathlib import Path

import pytest
import tantivy

from rag_serving.config import RaglineConfig
from rag_serving.index.fulltext import DOCUMENT_ROW_MAX_CHUNKS, FulltextIndex
from rag_serving.index.layout import IndexLayout
from rag_serving.index.manifest import read_manifest
from rag_serving.search import SearchEngine
from tests.conftest import build_index, write_config

FILLER = " ".join(f"filler{i} words about nothing in particular" for i in range(60))


def _notes(vault: Path) -> None:
    # "Split": the two query words sit in different chunks of one note.
    (vault / "Split.md").write_text(
        f"# Split\n\n## First\n\nThe axolotl lives in lakes. {FILLER}\n\n"
        f"## Second\n\nA quetzal nests in forests. {FILLER}\n"
    )
    # "Single": one of the words, once, in a note as long as one of Split's chunks.
    (vault / "Single.md").write_text(f"# Single\n\nAn axolotl was seen once. {FILLER}\n")
    (vault / "Other.md").write_text("# Other\n\nNothing to see about lakes here.\n")
    for i in range(20):  # a collection in which both words are rare
        (vault / f"Plain {i}.md").write_text(f"# Plain {i}\n\nNote {i} about lakes. {FILLER}\n")
    long_note = "\n\n".join(
        f"## Part {i}\n\nPangolin chapter {i}. {FILLER}" for i in range(DOCUMENT_ROW_MAX_CHUNKS + 8)
    )
    (vault / "Long.md").write_text(f"# Long\n\n{long_note}\n")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> RaglineConfig:
    root = tmp_path_factory.mktemp("doc-rows")
    vault = root / "vault"
    vault.mkdir()
    _notes(vault)
    return build_index(write_config(root, [{"name": "v", "kind": "markdown", "path": str(vault)}]))


def _fulltext(config: RaglineConfig) -> FulltextIndex:
    layout = IndexLayout(config.data_dir)
    active = read_manifest(layout.manifest_path).active
    assert active is not None
    return FulltextIndex(layout.fulltext_dir(active.key))


def _paths_of_documents(index: FulltextIndex, doc_ids: set[str]) -> set[str]:
    searcher = index.index.searcher()
    out = set()
    for doc_id in doc_ids:
        query = tantivy.Query.term_query(index.index.schema, "doc_id", doc_id)
        for _score, address in searcher.search(query, limit=1000).hits:
            out.add(searcher.doc(address)["path"][0])
    return out


def test_words_in_different_chunks_of_one_note_count_together(index: RaglineConfig) -> None:
    engine = SearchEngine(index)
    hits = engine.search("axolotl quetzal", k=5, mode="bm25").hits
    assert hits[0].path == "Split.md"
    assert len({h.chunk_id for h in hits if h.path == "Split.md"}) == 2  # both chunks


def test_a_short_document_has_one_row_and_a_long_one_none(index: RaglineConfig) -> None:
    fulltext = _fulltext(index)
    rows = fulltext.document_row_hashes("v")
    assert "Long.md" not in _paths_of_documents(fulltext, set(rows))
    assert {"Split.md", "Single.md", "Other.md"} <= _paths_of_documents(fulltext, set(rows))
    # The chunk rows are what the integrity check compares with LanceDB.
    assert all(len(cid) == 32 for cid in fulltext.row_hashes("v"))
    # The long note is still found, by its chunks.
    engine = SearchEngine(index)
    assert engine.search("pangolin", k=1, mode="bm25").hits[0].path == "Long.md"


def test_document_rows_follow_edits_and_deletions(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    _notes(vault)
    config_path = write_config(tmp_path, [{"name": "v", "kind": "markdown", "path": str(vault)}])
    config = build_index(config_path)
    before = _fulltext(config).document_row_hashes("v")
    (vault / "Single.md").write_text("# Single\n\nAn axolotl and a quetzal, together.\n")
    (vault / "Other.md").unlink()
    build_index(config_path)
    fulltext = _fulltext(config)
    after = fulltext.document_row_hashes("v")
    assert len(after) == len(before) - 1
    changed = {d for d in after if before.get(d) != after[d]}
    assert _paths_of_documents(fulltext, changed) == {"Single.md"}
    assert "Other.md" not in _paths_of_documents(fulltext, set(after))
    engine = SearchEngine(config)
    assert engine.search("axolotl quetzal", k=1, mode="bm25").hits[0].path == "Single.md"
