"""One very large note is indexed in bounded batches (issue 15): the chunk and embed
stages hand LanceDB its rows a bounded number at a time, still in one commit per
document, and the result is the index that one batch gives. Real notes (the Obsidian
help vault, concatenated), real LanceDB and Tantivy; embeddings from the Ollama
provider talking to the test suite's Ollama STAND-IN server (no Ollama server can
run here), which is deterministic and fast enough for a few hundred chunks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from rag_assets.sources import source_kind
from rag_assets.stages import chunk as chunk_stage
from rag_assets.stages.chunk import chunk_source, row_batches
from rag_assets.stages.embed import embed_source, target_generation
from rag_assets.stages.fulltext import sync_fulltext
from rag_assets.stages.parse import parse_source
from rag_assets.stages.scan import scan_source
from rag_serving.config import ChunkingConfig, OllamaConfig, SentenceTransformersConfig
from rag_serving.embedders import Embedder, create_embedder
from rag_serving.embedders.sentence_transformers import TOKENIZE_SLICE
from rag_serving.index import schema as schemas
from rag_serving.index.store import IndexStore
from rag_sources.formats.markdown import block_tokens, parse_markdown
from rag_sources.kinds.markdown.config import MarkdownSourceConfig
from tests.conftest import HELP_VAULT
from tests.embed_recorder import Recorder
from tests.ollama_standin import OllamaStandIn

pytestmark = pytest.mark.shared_data

BATCH = 16  # rows per batch in the bounded runs
NOTES = 40  # help-vault notes in the big note, each twice (repeated chunk texts)


@pytest.fixture(scope="module")
def embedder() -> Iterator[Embedder]:
    with OllamaStandIn() as server:
        config = OllamaConfig(
            provider="ollama", host=server.host, model="all-minilm", max_tokens=256
        )
        yield create_embedder(config, None)


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One note of ``NOTES`` help-vault notes under ``#`` headings, twice over (the
    second time the same chunk texts: the embedder is asked for each once)."""
    if not HELP_VAULT.is_dir():
        pytest.fail(f"{HELP_VAULT} is missing: run with ../shared/data or -m 'not shared_data'")
    notes = sorted(HELP_VAULT.rglob("*.md"))[:NOTES]
    parts = [
        f"# {note.stem}\n\n{parse_markdown(note.read_bytes(), note.name).body.strip()}\n\n"
        for note in notes
    ]
    root = tmp_path_factory.mktemp("big-note")
    (root / "All in one.md").write_text("".join(parts) * 2)
    return root


def index(data_dir: Path, vault: Path, embedder: Embedder, batch: int | None) -> dict[str, Any]:
    """All stages on ``vault``; ``batch``: rows per batch in the chunk and embed stages
    (None: the defaults). Returns the embed stage's outcome and the commits made."""
    store = IndexStore(data_dir)
    source = MarkdownSourceConfig(name="big", kind="markdown", path=vault)
    kind = source_kind(source)
    scan_source(store, kind, False)
    parse_source(store, kind, False, run_id="test")
    with pytest.MonkeyPatch.context() as patch:
        if batch is not None:
            patch.setattr(chunk_stage, "COMMIT_CHUNKS", batch)
        chunk_source(store, kind, ChunkingConfig(), embedder, False)
    staged_version = store.table("staged_chunks").version
    table = target_generation(store, embedder).table
    result = embed_source(
        store, source, embedder, False, **({"batch_size": batch} if batch else {})
    )
    served_version = store.table(table).version
    sync_fulltext(store, source, embedder, "test", ["big"])
    return {
        "result": result,
        "staged_version": staged_version,
        "served_version": served_version,
        "store": store,
        "table": table,
    }


def rows(store: IndexStore, table: str) -> list[dict[str, Any]]:
    found = store.read(table).to_pylist()
    for row in found:
        row.pop("indexed_at", None)
    return sorted(found, key=lambda r: r["chunk_id"])


def test_one_big_note_in_bounded_batches_gives_the_same_index(
    tmp_path: Path, vault: Path, embedder: Embedder
) -> None:
    recorder = Recorder(embedder)
    small = index(tmp_path / "small", vault, recorder, BATCH)
    whole = index(tmp_path / "whole", vault, embedder, None)

    staged = rows(small["store"], "staged_chunks")
    assert len(staged) > 10 * BATCH  # the one document is many batches long
    assert {r["doc_id"] for r in staged} == {staged[0]["doc_id"]}
    assert staged == rows(whole["store"], "staged_chunks")
    served, served_whole = (
        rows(small["store"], small["table"]),
        rows(whole["store"], whole["table"]),
    )
    vectors = {r["chunk_id"]: np.asarray(r.pop("vector")) for r in served}
    vectors_whole = {r["chunk_id"]: np.asarray(r.pop("vector")) for r in served_whole}
    assert served == served_whole
    for chunk_id, vector in vectors.items():
        np.testing.assert_allclose(vector, vectors_whole[chunk_id], atol=1e-6)

    # The embedder never got more than a batch of the document's texts at a time...
    assert recorder.calls and max(recorder.calls) <= BATCH
    # ...and a text repeated in a later batch of the same commit was not embedded again.
    distinct = len({r["embed_hash"] for r in staged})
    assert distinct < len(staged)
    assert sum(recorder.calls) == distinct == small["result"].extra["embedded"]
    assert small["result"].extra["embedded"] == whole["result"].extra["embedded"]

    # Still one commit for the document's chunks, in both tables (a search never
    # sees half of it): the same number of versions as with unbounded batches.
    assert small["staged_version"] == whole["staged_version"]
    assert small["served_version"] == whole["served_version"]


def test_row_batches_are_bounded_and_complete(vault: Path, embedder: Embedder) -> None:
    """The staged rows of a document are made ``size`` at a time, all of them, in order."""
    note = parse_markdown((vault / "All in one.md").read_bytes(), "All in one.md")
    kind = source_kind(MarkdownSourceConfig(name="big", kind="markdown", path=vault))
    view = chunk_stage.DocumentView(
        key="All in one.md", body=note.body, body_start_line=1, sections=[], file_type="md"
    )
    pieces = kind.chunk(view, embedder.count_tokens, 200, 256)
    doc = {"doc_id": "d", "source": "big", "content_hash": "h"}
    batches = list(row_batches([(doc, pieces)], "key", BATCH))
    assert len(pieces) > 3 * BATCH
    assert all(b.num_rows <= BATCH for b in batches)
    assert [b.num_rows for b in batches[:-1]] == [BATCH] * (len(batches) - 1)
    assert [o for b in batches for o in b.column("ordinal").to_pylist()] == [
        p.ordinal for p in pieces
    ]


def test_only_headings_get_inline_tokens(vault: Path) -> None:
    """Inline tokens of paragraphs, lists and tables are not parsed: nothing reads
    them, and for a 20 MB note they took most of a gigabyte."""
    text = (vault / "All in one.md").read_text()
    tokens = block_tokens(text)
    headings = [t for i, t in enumerate(tokens) if i and tokens[i - 1].type == "heading_open"]
    others = [
        t for i, t in enumerate(tokens)
        if t.type == "inline" and not (i and tokens[i - 1].type == "heading_open")
    ]  # fmt: skip
    assert len(headings) >= 2 * NOTES and others
    assert all(t.children for t in headings)
    assert not any(t.children for t in others)


def test_a_batch_that_cannot_be_made_fails_the_commit(tmp_path: Path) -> None:
    """Rows handed to LanceDB as they are made: an error making one is raised as it
    is, and nothing of the commit is written."""
    store = IndexStore(tmp_path / "data")
    schema = schemas.SOURCE_STATE
    row = {"source": "a", "last_run_id": "r", "generation": "g", "files": 1}

    def batches(fail: bool) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pylist([row], schema)
        if fail:
            raise ValueError("no vector for chunk 7")
        yield pa.RecordBatch.from_pylist([{**row, "source": "b"}], schema)

    with pytest.raises(ValueError, match="no vector for chunk 7"):
        store.apply_changes("source_state", schema, batches(fail=True))
    assert store.count("source_state") == 0
    store.apply_changes("source_state", schema, batches(fail=False))
    assert sorted(store.read("source_state").column("source").to_pylist()) == ["a", "b"]


def test_token_counts_come_from_bounded_tokenizer_calls() -> None:
    """The bundled model's tokenizer counts a note's sections a slice at a time (its
    Encoding objects cost ~28 KiB per text), with the same counts as one call."""
    model = create_embedder(SentenceTransformersConfig(), None)
    tokenizer = model.tokenizer  # type: ignore[attr-defined]
    sizes: list[int] = []

    class Recording:
        def encode_batch(self, texts: list[str], **kwargs: Any) -> Any:
            sizes.append(len(texts))
            return tokenizer.encode_batch(texts, **kwargs)

    note = parse_markdown((HELP_VAULT / "Home.md").read_bytes(), "Home.md").body
    texts = [note[i : i + 40 * (1 + i % 7)] for i in range(2 * TOKENIZE_SLICE + 5)]
    whole = [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    model.__dict__["tokenizer"] = Recording()
    assert model.count_tokens(texts) == whole
    assert sizes == [TOKENIZE_SLICE, TOKENIZE_SLICE, 5]
