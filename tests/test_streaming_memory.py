"""The indexing stages work in bounded batches: a source many batches long gives
the same index as one batch, on first indexing and through edits, renames,
deletes and re-chunking (real notes, real LanceDB, Tantivy and the bundled model)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_assets.sources import source_kind
from rag_assets.stages import chunk as chunk_stage
from rag_assets.stages import embed as embed_stage
from rag_assets.stages import parse as parse_stage
from rag_assets.stages.chunk import chunk_source
from rag_assets.stages.embed import embed_source, target_generation
from rag_assets.stages.fulltext import sync_fulltext
from rag_assets.stages.parse import parse_source
from rag_assets.stages.scan import scan_source
from rag_serving.config import ChunkingConfig, SentenceTransformersConfig
from rag_serving.embedders import Embedder, create_embedder
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.store import IndexStore
from rag_sources.kinds.markdown.config import MarkdownSourceConfig
from tests.conftest import HELP_VAULT
from tests.embed_recorder import Recorder

pytestmark = pytest.mark.shared_data

NOTES = [
    "Linking notes and files/Internal links.md",
    "Linking notes and files/Aliases.md",
    "Linking notes and files/Embed files.md",
    "Getting started/Create a vault.md",
    "Getting started/Link notes.md",
    "Getting started/Sync your notes across devices.md",
]
SMALL = {"parse": 2, "chunk_read": 2, "chunk_commit": 5, "embed": 6, "scan": 4}


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    # No data dir: documents go through PyTorch, and no ONNX export is made.
    return create_embedder(SentenceTransformersConfig(), None)


@pytest.fixture()
def vault(tmp_path: Path) -> Path:
    if not HELP_VAULT.is_dir():
        pytest.fail(f"{HELP_VAULT} is missing: run with ../shared/data or -m 'not shared_data'")
    root = tmp_path / "vault"
    for rel in NOTES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(HELP_VAULT / rel, root / rel)
    return root


def index(
    data_dir: Path,
    vault: Path,
    embedder: Embedder,
    small: bool,
    monkeypatch: pytest.MonkeyPatch,
    chunking: ChunkingConfig | None = None,
    full: bool = False,
) -> dict[str, Any]:
    """Run every stage on ``vault``; ``small`` makes every batch tiny."""
    with monkeypatch.context() as patch:
        if small:
            patch.setattr(parse_stage, "COMMIT_DOCUMENTS", SMALL["parse"])
            patch.setattr(chunk_stage, "COMMIT_CHUNKS", SMALL["chunk_commit"])
            patch.setattr(embed_stage, "SCAN_BATCH", SMALL["scan"])
        store = IndexStore(data_dir)
        source = MarkdownSourceConfig(name="help", kind="markdown", path=vault)
        kind = source_kind(source)
        scan_source(store, kind, full)
        parse_source(store, kind, full, run_id="test")
        chunk_source(
            store, kind, chunking or ChunkingConfig(), embedder, full,
            batch_size=SMALL["chunk_read"] if small else chunk_stage.READ_BATCH,
        )  # fmt: skip
        result = embed_source(
            store, source, embedder, full,
            batch_size=SMALL["embed"] if small else embed_stage.PUBLISH_BATCH,
        )  # fmt: skip
        sync_fulltext(store, source, embedder, "test", ["help"])
    return {"counts": result.counts(), **result.extra}


def snapshot(data_dir: Path, embedder: Embedder) -> dict[str, Any]:
    """Everything the stages wrote, minus write times; vectors separately."""
    store = IndexStore(data_dir)
    generation = target_generation(store, embedder)
    out: dict[str, Any] = {}
    for table in ("files", "documents", "file_issues", "staged_chunks", generation.table):
        rows = store.read(table).to_pylist()
        for row in rows:
            for column in ("seen_at", "indexed_at", "recorded_at", "run_id"):
                row.pop(column, None)
        name = "chunks" if table == generation.table else table
        key = "chunk_id" if name in ("staged_chunks", "chunks") else "doc_id"
        out[name] = sorted(rows, key=lambda r: r[key])
    vectors = {r["chunk_id"]: np.asarray(r.pop("vector")) for r in out["chunks"]}
    out["vectors"] = vectors
    index = FulltextIndex(store.layout.fulltext_dir(generation.key))
    out["tantivy"] = index.row_hashes("help")
    return out


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for table in ("files", "documents", "file_issues", "staged_chunks", "chunks", "tantivy"):
        assert a[table] == b[table], table
    assert a["vectors"].keys() == b["vectors"].keys()
    for chunk_id, vector in a["vectors"].items():
        np.testing.assert_allclose(vector, b["vectors"][chunk_id], atol=1e-5)
    # The served table holds exactly the staged chunks.
    assert {r["chunk_id"] for r in a["chunks"]} == {r["chunk_id"] for r in a["staged_chunks"]}
    assert set(a["tantivy"]) == {r["chunk_id"] for r in a["chunks"]}


def bump(path: Path) -> None:
    later = time.time() + 10
    os.utime(path, (later, later))


def test_small_batches_give_the_same_index_as_one_batch(
    tmp_path: Path, vault: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_dir, big_dir = tmp_path / "small", tmp_path / "big"
    recorder = Recorder(embedder)
    first = index(small_dir, vault, recorder, True, monkeypatch)
    index(big_dir, vault, embedder, False, monkeypatch)
    small, big = snapshot(small_dir, embedder), snapshot(big_dir, embedder)
    assert_same(small, big)

    chunks = len(small["chunks"])
    assert chunks > 4 * SMALL["embed"]  # the source is many batches long
    assert first["counts"]["new"] == chunks and first["embedded"] == chunks
    per_doc: dict[str, int] = {}
    for row in small["staged_chunks"]:
        per_doc[row["doc_id"]] = per_doc.get(row["doc_id"], 0) + 1
    # Embedded a few whole documents at a time: never more than a batch, unless one
    # document alone is bigger (documents are never split across commits).
    bound = SMALL["embed"] + max(per_doc.values()) - 1
    assert len(recorder.calls) >= chunks // bound
    assert max(recorder.calls) <= bound
    assert sum(recorder.calls) == chunks

    # Nothing changed: nothing written or embedded.
    quiet = index(small_dir, vault, embedder, True, monkeypatch)
    assert quiet["embedded"] == 0 and quiet["counts"]["unchanged"] == chunks


def test_small_batches_follow_edits_renames_deletes_and_rechunking(
    tmp_path: Path, vault: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_dir, big_dir = tmp_path / "small", tmp_path / "big"
    index(small_dir, vault, embedder, True, monkeypatch)
    index(big_dir, vault, embedder, False, monkeypatch)

    def both(**kwargs: Any) -> dict[str, Any]:
        outcome = index(small_dir, vault, embedder, True, monkeypatch, **kwargs)
        index(big_dir, vault, embedder, False, monkeypatch, **kwargs)
        assert_same(snapshot(small_dir, embedder), snapshot(big_dir, embedder))
        return outcome

    # An edit of one paragraph re-embeds only the chunk(s) it touched.
    note = vault / "Linking notes and files" / "Internal links.md"
    text = note.read_text()
    note.write_text(text.replace("\n\n", "\n\nGlacier moraine sediment. ", 1))
    bump(note)
    edited = both()
    assert 1 <= edited["embedded"] <= 2

    # A rename re-embeds nothing.
    (vault / "Getting started").rename(vault / "Start")
    moved = both()
    assert moved["embedded"] == 0 and moved["counts"]["new"] > 0

    # A deleted note's chunks disappear.
    (vault / "Start" / "Link notes.md").unlink()
    deleted = both()
    assert deleted["counts"]["deleted"] > 0 and deleted["embedded"] == 0
    paths = {r["path"] for r in snapshot(small_dir, embedder)["chunks"]}
    assert "Start/Link notes.md" not in paths

    # Other chunk sizes: documents are re-chunked; chunks that stay the same are kept
    # (and served), the others replaced, vectors reused where the text is unchanged.
    rechunked = both(chunking=ChunkingConfig(target_tokens=90))
    assert rechunked["counts"]["new"] > 0
    # --full redoes everything and reuses every vector.
    full = both(chunking=ChunkingConfig(target_tokens=90), full=True)
    assert full["embedded"] == 0
