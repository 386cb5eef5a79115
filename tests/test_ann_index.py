"""Scalar and vector indexes for scale (rag_serving/index/ann.py), on real LanceDB
and Tantivy with real-dimension (384) vectors and thresholds lowered to a few
thousand rows.

Queries are embedded by a stand-in that returns known vectors (a stored row's
vector plus a little noise), so the exact nearest neighbour of every query is
known and no model is loaded."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rag_serving.config import RaglineConfig
from rag_serving.embedders.base import Embedder
from rag_serving.index import ann
from rag_serving.index.fingerprint import EmbedderFingerprint
from rag_serving.index.fulltext import FulltextIndex
from rag_serving.index.manifest import Generation, IndexManifest, write_manifest
from rag_serving.index.schema import SCHEMA_VERSION, chunks_schema
from rag_serving.index.store import IndexStore
from rag_serving.search import SearchEngine, SearchFilters

DIM = 384
ROWS = 3000
SOURCES = ("alpha", "beta", "gamma")
FINGERPRINT = EmbedderFingerprint("sentence-transformers", "all-MiniLM-L6-v2", DIM)
SMALL = {"scalar_min_rows": 1000, "vector_min_rows": 2000}


class KnownVectors(Embedder):
    """Embeds a query ``"row <chunk_id>"`` as that row's vector plus noise."""

    provider = "sentence-transformers"

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.vectors = vectors
        self.rng = np.random.default_rng(3)
        self.last = np.zeros(DIM, np.float32)  # the last query vector

    @property
    def model(self) -> str:
        return "all-MiniLM-L6-v2"

    @property
    def dimension(self) -> int:
        return DIM

    @property
    def max_tokens(self) -> int:
        return 256

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        base = self.vectors[text.removeprefix("row ")]
        noise = self.rng.standard_normal(DIM).astype(np.float32) * (0.05 / DIM**0.5)
        self.last = ((base + noise) / np.linalg.norm(base + noise)).astype(np.float32)
        return self.last


def _clustered(rng: np.random.Generator, n: int, centers: np.ndarray) -> np.ndarray:
    """Unit vectors around random centres (like embeddings: clustered, not uniform;
    cosine ~0.94 to their centre)."""
    picks = rng.integers(0, len(centers), n)
    vectors = centers[picks] + rng.standard_normal((n, DIM)).astype(np.float32) * 0.35
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def _rows(start: int, vectors: np.ndarray) -> pa.Table:
    n = len(vectors)
    ids = [f"{i:032x}" for i in range(start, start + n)]
    sources = [SOURCES[i % len(SOURCES)] for i in range(start, start + n)]
    now = datetime.now(UTC)
    columns = {
        "chunk_id": ids,
        "doc_id": [f"d{i // 4:031x}" for i in range(start, start + n)],
        "source": sources,
        "kind": ["markdown"] * n,
        "path": [f"{sources[i - start]}/note-{i // 4}.md" for i in range(start, start + n)],
        "title": [f"note {i // 4}" for i in range(start, start + n)],
        "heading": [""] * n,
        "anchor": [""] * n,
        "ordinal": [i % 4 for i in range(start, start + n)],
        "line_start": [1] * n,
        "line_end": [2] * n,
        "text": [f"chunk number {i} about topic{i % 37}" for i in range(start, start + n)],
        "embed_hash": ids,
        "tags": [[] for _ in range(n)],
        "modified": [now] * n,
        "indexed_at": [now] * n,
        "row_hash": ids,
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
        "facets": [["type:md"] for _ in range(n)],
    }
    return pa.table(columns, schema=chunks_schema(DIM))


class Index:
    """A real index on disk (manifest, LanceDB chunks, Tantivy) and an engine on it."""

    def __init__(self, root: Path, rows: int = ROWS):
        self.rng = np.random.default_rng(11)
        self.centers = self.rng.standard_normal((40, DIM)).astype(np.float32)
        self.data_dir = root / "data"
        self.generation = Generation(FINGERPRINT, datetime.now(UTC).isoformat())
        self.store = IndexStore(self.data_dir)
        self.table = self.store.chunks(self.generation.table, DIM)
        self.vectors: dict[str, np.ndarray] = {}
        self.next = 0
        self.add(rows)
        now = datetime.now(UTC).isoformat()
        write_manifest(
            self.store.layout.manifest_path,
            IndexManifest(SCHEMA_VERSION, self.generation, None, now),
        )
        for source in SOURCES:
            (root / source).mkdir()
        config = RaglineConfig(
            data_dir=self.data_dir,
            sources=[{"name": s, "kind": "markdown", "path": str(root / s)} for s in SOURCES],
        )
        self.engine = SearchEngine(config, read_consistency_s=0)
        self.engine._embedder = KnownVectors(self.vectors)

    def add(self, n: int, zero: bool = False) -> list[str]:
        """Append ``n`` rows (and their Tantivy documents); returns their ids. With
        ``zero``, their vectors are all zeros (what a broken embedder might give)."""
        vectors = np.zeros((n, DIM), np.float32) if zero else _clustered(self.rng, n, self.centers)
        table = _rows(self.next, vectors)
        self.table.add(table)
        ids = table.column("chunk_id").to_pylist()
        self.vectors.update(zip(ids, vectors, strict=True))
        self.next += n
        everything = self.store.read(self.generation.table).drop_columns(["vector"])
        FulltextIndex.rebuild(
            self.store.layout.fulltext_dir(self.generation.key), everything.to_pylist()
        )
        return ids

    def exact(self, where: str | None = None, k: int = 10) -> list[str]:
        """The exact top ``k`` for the last query the engine embedded."""
        query = self.table.search(self.engine._embedder.last).distance_type("cosine")
        if where:
            query = query.where(where, prefilter=True)
        result = query.bypass_vector_index().limit(k).select(["chunk_id"]).to_arrow()
        return result.column("chunk_id").to_pylist()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    """An index past the (lowered) thresholds, with its indexes built."""
    index = Index(tmp_path_factory.mktemp("ann"))
    report = ann.ensure_search_indexes(index.store, index.generation.table, **SMALL)
    assert report["vector_index"] == "created" and report["errors"] == "none"
    return index


def _names(table) -> dict[str, str]:
    return {ix.name: ix.index_type for ix in table.list_indices()}


def test_no_index_below_the_thresholds(tmp_path: Path) -> None:
    index = Index(tmp_path)
    report = ann.ensure_search_indexes(
        index.store, index.generation.table, scalar_min_rows=ROWS + 1, vector_min_rows=ROWS + 1
    )
    assert report["rows"] == ROWS and report["errors"] == "none"
    assert report["vector_index"] == "none (flat search)"
    assert _names(index.table) == {}
    assert ann.find_vector_index(index.table) is None


def test_scalar_indexes_first_then_the_vector_index(tmp_path: Path) -> None:
    index = Index(tmp_path)
    table = index.generation.table
    report = ann.ensure_search_indexes(
        index.store, table, scalar_min_rows=1000, vector_min_rows=ROWS + 1
    )
    assert _names(index.table) == {
        "chunk_id_idx": "BTree",
        "doc_id_idx": "BTree",
        "source_idx": "BTree",
    }
    assert report["vector_index"] == "none (flat search)"

    report = ann.ensure_search_indexes(index.store, table, **SMALL)
    assert report["vector_index"] == "created" and report["errors"] == "none"
    vector = ann.find_vector_index(index.table)
    assert vector is not None and vector.trained_rows == ROWS
    assert vector.partitions == ann.MIN_PARTITIONS
    assert index.table.index_stats(vector.name).num_indexed_rows == ROWS

    again = ann.ensure_search_indexes(index.store, table, **SMALL)
    assert again["vector_index"] == "kept" and again["actions"] == "none"


def test_indexed_search_finds_the_exact_neighbours(index: Index) -> None:
    assert ann.find_vector_index(index.table) is not None
    sample = list(index.vectors)[::60]
    top1 = recall = 0.0
    for chunk_id in sample:
        hits = index.engine.search(f"row {chunk_id}", k=10, mode="vector").hits
        found = [h.chunk_id for h in hits]
        top1 += found[0] == chunk_id
        recall += len(set(found) & set(index.exact())) / 10
    assert top1 / len(sample) >= 0.95
    assert recall / len(sample) >= 0.9


def test_prefilters_apply_with_the_index(index: Index) -> None:
    assert ann.find_vector_index(index.table) is not None
    outside = [cid for cid in list(index.vectors)[:300] if int(cid, 16) % 3 != 1][:10]
    for chunk_id in outside:  # a row of alpha/gamma, searched within beta only
        result = index.engine.search(
            f"row {chunk_id}", k=10, mode="vector", filters=SearchFilters(sources=("beta",))
        )
        assert len(result.hits) == 10
        assert {h.source for h in result.hits} == {"beta"}
        wanted = index.exact("source IN ('beta')")
        assert len({h.chunk_id for h in result.hits} & set(wanted)) >= 8


def test_rows_added_later_are_found_before_and_after_optimize(tmp_path: Path) -> None:
    index = Index(tmp_path)
    table = index.generation.table
    ann.ensure_search_indexes(index.store, table, **SMALL)
    new = index.add(300)
    report = ann.ensure_search_indexes(index.store, table, **SMALL)  # 300 < fold threshold
    assert report["unindexed_rows"] == 300 and report["vector_index"] == "kept"
    for chunk_id in new[::30]:
        assert index.engine.search(f"row {chunk_id}", k=5, mode="vector").hits[0].chunk_id == (
            chunk_id
        )
        assert index.engine.search(f"row {chunk_id}", k=5, mode="hybrid").hits

    report = ann.ensure_search_indexes(index.store, table, fold_unindexed_rows=100, **SMALL)
    assert report["optimized"] is True and report["unindexed_rows"] == 0
    for chunk_id in new[::30]:
        hits = index.engine.search(f"row {chunk_id}", k=5, mode="vector").hits
        assert hits[0].chunk_id == chunk_id


def test_retrained_after_growth_and_dropped_after_shrinking(tmp_path: Path) -> None:
    index = Index(tmp_path, rows=2500)
    table = index.generation.table
    ann.ensure_search_indexes(index.store, table, **SMALL)
    assert ann.find_vector_index(index.table).trained_rows == 2500
    index.add(2600)  # 5,100 rows: more than twice what it was trained on
    report = ann.ensure_search_indexes(index.store, table, **SMALL)
    assert report["vector_index"] == "retrained"
    vectors = [n for n, kind in _names(index.table).items() if kind == "IvfSq"]
    assert vectors == [ann.vector_index_name(5100, ann.num_partitions(5100))]
    assert index.store.count(table) == 5100  # nothing lost

    index.table.delete(f"ordinal > 0 OR chunk_id >= '{3000:032x}'")  # 750 rows left: under
    # half the threshold
    report = ann.ensure_search_indexes(index.store, table, **SMALL)
    assert report["vector_index"] == "dropped" and ann.find_vector_index(index.table) is None
    hits = index.engine.search(f"row {0:032x}", k=3, mode="vector").hits
    assert hits[0].chunk_id == f"{0:032x}"


def test_a_failing_build_is_reported_not_raised(tmp_path: Path) -> None:
    # Zero vectors have no cosine direction: LanceDB's k-means has nothing to train
    # on and the vector index build fails (a real failure, not a simulated one).
    index = Index(tmp_path, rows=10)
    index.add(2000, zero=True)
    report = ann.ensure_search_indexes(index.store, index.generation.table, **SMALL)
    assert report["errors"].startswith("vector: ") and "KMeans" in report["errors"]
    assert report["vector_index"] == "none (flat search)"
    assert ann.find_vector_index(index.table) is None
    assert {"chunk_id_idx", "doc_id_idx", "source_idx"} <= set(_names(index.table))
    hits = index.engine.search(f"row {5:032x}", k=3, mode="vector").hits
    assert hits[0].chunk_id == f"{5:032x}"
    assert index.store.count(index.generation.table) == 2010


def test_a_missing_table_is_reported_not_raised(tmp_path: Path) -> None:
    report = ann.ensure_search_indexes(IndexStore(tmp_path), "chunks_missing", **SMALL)
    assert report["errors"] == "none" and report["vector_index"] == "no table"
