"""Many chunks with one text (a mail loop of 20,000 identical messages, boilerplate
notes) cost the embed stage one stored vector per text, not one per chunk: it read
every row sharing a text back from LanceDB, as Python lists, once per commit
(20,000 messages: 1.2 GB and 77 s; now 0.7 GB and 44 s). Real stages, LanceDB and
the test suite's Ollama STAND-IN (no Ollama server can run here)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from rag_assets.sources import source_kind
from rag_assets.stages.chunk import chunk_source
from rag_assets.stages.embed import embed_source, target_generation
from rag_assets.stages.parse import parse_source
from rag_assets.stages.scan import scan_source
from rag_serving.config import ChunkingConfig, OllamaConfig
from rag_serving.embedders import create_embedder
from rag_serving.index.store import IndexStore
from rag_sources.kinds.markdown.config import MarkdownSourceConfig
from tests.ollama_standin import OllamaStandIn

NOTES = 3000
BATCH = 50  # chunks per commit: 60 commits


def test_chunks_sharing_one_text_read_its_vector_once(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for number in range(NOTES):
        folder = vault / f"d{number // 300}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"reply {number}.md").write_text("I am away until Monday.\n")
    store = IndexStore(tmp_path / "data")
    source = MarkdownSourceConfig(name="loop", kind="markdown", path=vault)
    kind = source_kind(source)
    with OllamaStandIn() as server:
        embedder = create_embedder(
            OllamaConfig(provider="ollama", host=server.host, model="all-minilm", max_tokens=256),
            None,
        )
        scan_source(store, kind, False)
        parse_source(store, kind, False, run_id="test")
        chunk_source(store, kind, ChunkingConfig(), embedder, False)
        tracemalloc.start()
        try:
            result = embed_source(store, source, embedder, False, batch_size=BATCH)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    table = target_generation(store, embedder).table
    assert store.count(table) == NOTES
    assert result.extra["embedded"] == 1 and result.extra["vectors_reused"] == NOTES - 1
    # Before: the last commits read ~2,950 stored vectors each as lists of floats (~36 MB).
    assert peak < 12 * 2**20, f"{peak / 2**20:.1f} MiB"
    vectors = store.read(table, columns=["vector"]).column("vector").to_pylist()
    assert all(vector == vectors[0] for vector in vectors)
