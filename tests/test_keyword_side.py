"""The keyword side (issue 31, item 1): a query's words weighed as BM25 over a
question's words (stop words low, repeats counted), and each chunk's document scored
as one text beside it, in a real Tantivy index and its documents' index."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rag_serving.index.filters import SearchFilters
from rag_serving.index.fulltext import FulltextIndex, document_key, weigh_query_words
from rag_serving.search.documents import with_document_scores

# Document "a" has the query's two words in two chunks; "c" has one of them in a
# short chunk, which chunk-level BM25 ranks first.
CHUNKS = [
    ("a", "wing of the tail panel at speed"),
    ("a", "flutter of the tail panel at speed"),
    ("c", "flutter panel"),
    ("d", "root panel"),
    ("e", "tail panel"),
    ("f", "spar panel"),
]


def _rows(chunks: list[tuple[str, str]], source: str = "s") -> list[dict]:
    return [
        {"chunk_id": f"{i:032x}", "doc_id": doc, "source": source, "path": f"{i}.md",
         "text": text, "row_hash": "h", "modified": datetime(2024, 1, 1, tzinfo=UTC)}
        for i, (doc, text) in enumerate(chunks)
    ]  # fmt: skip


@pytest.fixture()
def index(tmp_path: Path) -> FulltextIndex:
    index = FulltextIndex(tmp_path / "fulltext")
    index.replace([], _rows(CHUNKS))
    return index


def _docs(hits: list) -> list[str]:
    return [CHUNKS[int(hit.chunk_id, 16)][0] for hit in hits]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "what are the effects of wing flutter on a wing",
            "what^0.2 are^0.2 the^0.2 effects of^0.2 wing^2 flutter on^0.2 a^0.2 ",
        ),
        ("wings wing", "wings^2 "),  # one word in two forms
        ("Wing, wing? lift", "Wing^2  lift"),  # a sentence's punctuation is not a word
        ("the who", "the^0.2 who^0.2"),
        ('"the thing" of', '"the thing" of^0.2'),  # a phrase is left as written
        ("a AND the", "a AND the"),  # so is boolean syntax
        ("-the wing", "-the wing"),
    ],
)
def test_weigh_query_words(query: str, expected: str) -> None:
    assert weigh_query_words(query) == expected


def test_a_document_holding_the_words_in_two_chunks_ranks_first(index: FulltextIndex) -> None:
    hits = index.search("wing flutter", SearchFilters(), 10)
    assert _docs(hits) == ["c", "a", "a"]  # chunk by chunk, the short one wins
    scores = index.document_scores("wing flutter", [hit.doc_key for hit in hits])
    assert scores[document_key("a")] > scores[document_key("c")]
    ranked, _ = with_document_scores(hits, scores)
    assert [CHUNKS[int(chunk_id, 16)][0] for chunk_id in ranked] == ["a", "c", "a"]


def test_a_document_is_scored_only_when_asked_for(index: FulltextIndex) -> None:
    """Only the documents the chunks' search found (within the caller's filters) are
    looked at: a document outside them gets no score, whatever it holds."""
    only_c = index.document_scores("wing flutter", [document_key("c")])
    assert list(only_c) == [document_key("c")]
    assert index.document_scores("wing flutter", []) == {}
    assert index.document_scores("", [document_key("a")]) == {}


def test_the_documents_index_follows_the_chunks(index: FulltextIndex, tmp_path: Path) -> None:
    key = document_key("a")
    assert key in index.document_scores("flutter", [key])
    index.replace([f"{1:032x}"], [])  # a's chunk holding "flutter" goes
    assert index.document_scores("flutter", [key]) == {}
    assert key in index.document_scores("wing", [key])
    index.replace([f"{0:032x}"], [])  # and its last chunk
    assert index.document_scores("wing", [key]) == {}
    assert index.documents.searcher().num_docs == 4  # c, d, e, f
    index.replace([], _rows([("z", "wing of another source")], source="t"))
    index.delete_source("s")
    assert index.documents.searcher().num_docs == 1
    rebuilt = FulltextIndex.rebuild(tmp_path / "fulltext", _rows(CHUNKS))
    assert rebuilt.documents.searcher().num_docs == 5
    assert document_key("a") in rebuilt.document_scores("flutter", [document_key("a")])


def test_a_chunk_without_a_document_row_is_its_own_document() -> None:
    from rag_serving.index.fulltext import Bm25Hit

    hits = [Bm25Hit("1" * 32, 2.0, "k1"), Bm25Hit("2" * 32, 1.0, "k2")]
    ranked, scores = with_document_scores(hits, {"k2": 3.0})
    assert ranked == ["1" * 32, "2" * 32]
    assert scores == pytest.approx([1.0 + 0.2, 1.0 + 0.2 * 0.5])
    assert with_document_scores([], {"k": 1.0}) == ([], [])


def test_code_commits_and_long_documents_have_no_document_row(tmp_path: Path) -> None:
    """A code file or commit (git) and a document of more than MAX_DOCUMENT_CHUNKS
    chunks (a book) are searched by their chunks alone."""
    from rag_serving.index.fulltext import MAX_DOCUMENT_CHUNKS

    index = FulltextIndex(tmp_path / "fulltext")
    rows = _rows(
        [("note", "wing flutter")] + [("book", "wing flutter")] * (MAX_DOCUMENT_CHUNKS + 1)
    )
    code = _rows([("code", "wing flutter")], source="repo")
    code[0]["chunk_id"], code[0]["kind"] = "f" * 32, "git"
    index.replace([], rows + code)
    keys = [document_key(name) for name in ("note", "book", "code")]
    assert list(index.document_scores("wing flutter", keys)) == [document_key("note")]


def test_documents_left_behind_by_a_stopped_writer_are_repaired(tmp_path: Path) -> None:
    """``replace`` commits the chunks, then the documents' rows. A writer stopped between
    the two leaves its mark, and the next writer remakes the rows out of step."""
    index = FulltextIndex(tmp_path / "fulltext")
    rows = _rows(CHUNKS)
    for number, row in enumerate(rows):
        row["row_hash"] = f"h{number}"
    index.replace([], rows)
    assert index.documents_out_of_step("s") == set()
    assert not (index.path / "documents.pending").exists()
    # The first half of a replace that stopped: a's "flutter" chunk gone from the chunks'
    # index, a's row as it was, and the mark.
    (index.path / "documents.pending").write_text("")
    writer = index.index.writer(heap_size=15_000_000, num_threads=1)
    writer.delete_documents_by_term("chunk_id", f"{1:032x}")
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    key = document_key("a")
    assert index.documents_out_of_step("s") == {"a"}
    assert index.documents_out_of_step("s", ["c", "d"]) == set()
    assert key in index.document_scores("flutter", [key])  # stale: a no longer says it
    assert FulltextIndex(index.path).finish_documents() == 1  # the next writer
    index.reload()
    assert index.documents_out_of_step() == set()
    assert index.document_scores("flutter", [key]) == {}
    assert key in index.document_scores("wing", [key])
    assert not (index.path / "documents.pending").exists()
    assert index.finish_documents() == 0  # no mark: nothing read
    # A document's row lost (deleted by hand) is out of step too.
    writer = index.documents.writer(heap_size=15_000_000, num_threads=1)
    writer.delete_documents_by_term("chunk_id", document_key("c"))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    assert index.documents_out_of_step("s") == {"c"}
    assert index.repair_documents("s") == 1
    index.reload()
    assert index.documents_out_of_step("s") == set()
