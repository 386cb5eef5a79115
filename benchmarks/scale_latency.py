"""Query latency at 10k, 100k and 1M chunks, flat and with the automatic indexes.

Builds synthetic indexes in the project's real layout (``index.json``, the
``documents``, ``files`` and ``chunks_<key>`` LanceDB tables, the Tantivy index),
then times 100 real question-like queries per mode through one warm
``SearchEngine``: first flat (no vector index), then after
``ensure_search_indexes`` (scalar indexes and the vector index at the documented
thresholds). Also recall@10 of the indexed vector search against the exact one,
index build seconds, and the bare components of each mode as served
(benchmarks/yardsticks.py) in the same run, so every number has a ratio.

Synthetic data: vectors are mixtures of real all-MiniLM-L6-v2 chunk vectors (from
the ``ragline eval`` indexes under /tmp/ragline-eval) plus noise, so they keep the
real cluster structure; text is drawn from the same real chunks' words (60%) and
from their corpus-wide word frequencies (Zipf-like, 40%), so BM25 sees a real
vocabulary and term distribution.

    python benchmarks/scale_latency.py [--sizes 10000,100000,1000000] [--data-root DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import SHARED_DATA, save
from benchmarks.yardsticks import bare_components

EVAL_ROOT = Path("/tmp/ragline-eval")
EVAL_SETS = ("scifact", "cranfield", "cisi", "cosqa")
SOURCES = ("notes", "papers", "code", "mail")  # synthetic sources, uneven sizes
SOURCE_SHARE = (0.55, 0.25, 0.15, 0.05)
TAGS = ("project", "reading", "idea", "todo", "reference", "archive", "meeting", "draft")
BATCH = 50_000  # rows per LanceDB write
_WORD = re.compile(r"\w+")
_HEX_ID = re.compile(r"[0-9a-f]{16,}")  # some eval sets title documents by id


# ---- real material ----------------------------------------------------------


@dataclass
class RealMaterial:
    """Real chunk vectors and words that the synthetic rows are drawn from."""

    vectors: np.ndarray  # (n, dim) float32, unit length
    vocabulary: np.ndarray  # word strings (object array)
    word_ids: np.ndarray  # all chunks' words as vocabulary ids, concatenated
    offsets: np.ndarray  # chunk i's words: word_ids[offsets[i]:offsets[i + 1]]
    cumulative: np.ndarray  # cumulative corpus frequency of each vocabulary word
    titles: list[str]


def load_real(eval_root: Path = EVAL_ROOT) -> RealMaterial:
    """Vectors and texts of the real chunks in the ``ragline eval`` indexes."""
    from rag_serving.index.manifest import read_manifest
    from rag_serving.index.store import IndexStore

    vectors, texts, titles = [], [], []
    for name in EVAL_SETS:
        data_dir = eval_root / name / "index"
        if not (data_dir / "index.json").is_file():
            continue
        manifest = read_manifest(data_dir / "index.json")
        if manifest.active is None:
            continue
        table = IndexStore(data_dir).read(
            manifest.active.table, columns=["text", "title", "vector"]
        )
        dim = table.schema.field("vector").type.list_size
        flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        vectors.append(flat.reshape(-1, dim).astype(np.float32))
        texts.extend(table.column("text").to_pylist())
        titles.extend(
            t for t in table.column("title").to_pylist() if t and not _HEX_ID.fullmatch(t)
        )
    if not vectors:  # no `ragline eval` indexes here: embed some real texts instead
        texts, titles, matrix = embed_real_texts()
        vectors.append(matrix)
    matrix = np.concatenate(vectors)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    counts: Counter[str] = Counter()
    tokenized = [_WORD.findall(t) for t in texts]
    for words in tokenized:
        counts.update(words)
    vocabulary = np.array(sorted(counts, key=counts.__getitem__, reverse=True), dtype=object)
    index = {w: i for i, w in enumerate(vocabulary)}
    word_ids = np.fromiter((index[w] for ws in tokenized for w in ws), dtype=np.int32)
    offsets = np.concatenate([[0], np.cumsum([len(ws) for ws in tokenized])])
    freq = np.array([counts[w] for w in vocabulary], dtype=np.float64)
    return RealMaterial(matrix, vocabulary, word_ids, offsets, np.cumsum(freq) / freq.sum(), titles)


def embed_real_texts(count: int = 3000) -> tuple[list[str], list[str], np.ndarray]:
    """``count`` real abstracts from the BEIR sets, embedded with the bundled model."""
    from rag_serving.config import SentenceTransformersConfig
    from rag_serving.embedders import create_embedder

    texts, titles = [], []
    for name in EVAL_SETS:
        with (SHARED_DATA / "eval" / name / "corpus.jsonl").open() as lines:
            for line in lines:
                doc = json.loads(line)
                if doc.get("text"):
                    texts.append(doc["text"][:1200])
                    titles.append(doc.get("title") or "")
                if len(texts) >= count * (EVAL_SETS.index(name) + 1) // len(EVAL_SETS):
                    break
    print(f"embedding {len(texts)} real texts (no ragline eval indexes found)…", flush=True)
    embedder = create_embedder(SentenceTransformersConfig())
    return texts, titles, np.asarray(embedder.embed_documents(texts), dtype=np.float32)


# ---- synthetic rows -----------------------------------------------------------


def _hex_ids(prefix: str, start: int, count: int) -> list[str]:
    return [
        hashlib.blake2b(f"{prefix}{i}".encode(), digest_size=16).hexdigest()
        for i in range(start, start + count)
    ]


def synthetic_vectors(real: np.ndarray, base: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors near the real vectors ``real[base]``: each is its base plus two
    other real vectors (weights 0.4 and 0.25) plus isotropic noise (norm ~0.35), so
    cosine to the base is ~0.85 and the real clusters survive."""
    n, dim = len(base), real.shape[1]
    others = rng.integers(0, len(real), size=(n, 2))
    out = real[base].copy()
    out += 0.4 * real[others[:, 0]]
    out += 0.25 * real[others[:, 1]]
    out += rng.standard_normal((n, dim), dtype=np.float32) * np.float32(0.35 / np.sqrt(dim))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def synthetic_texts(
    material: RealMaterial, base: np.ndarray, rng: np.random.Generator
) -> list[str]:
    """For each base chunk, as many words as it has: 60% drawn from its own words, 40%
    from the corpus-wide word distribution."""
    starts, ends = material.offsets[base], material.offsets[base + 1]
    lengths = np.maximum(ends - starts, 8)
    total = int(lengths.sum())
    owner = np.repeat(np.arange(len(base)), lengths)
    own_len = np.maximum(ends - starts, 1)[owner]
    own = material.word_ids[
        np.minimum(starts[owner] + (rng.random(total) * own_len).astype(np.int64),
                   len(material.word_ids) - 1)
    ]  # fmt: skip
    background = np.searchsorted(material.cumulative, rng.random(total))
    background = np.minimum(background, len(material.vocabulary) - 1)
    ids = np.where(rng.random(total) < 0.6, own, background)
    words = material.vocabulary[ids]
    bounds = np.cumsum(lengths)[:-1]
    return [" ".join(chunk) for chunk in np.split(words, bounds)]


@dataclass
class Batches:
    """One write batch of every table."""

    chunks: pa.Table
    documents: pa.Table
    files: pa.Table


def synthetic_batches(
    material: RealMaterial, size: int, dim: int, seed: int = 7
) -> Iterator[Batches]:
    """``size`` chunks in batches of whole documents (1–7 chunks each, 4 on average)."""
    from rag_serving.index import schema

    rng = np.random.default_rng(seed)
    chunk_schema = schema.chunks_schema(dim)
    epoch = datetime(2024, 1, 1, tzinfo=UTC)
    made = doc_no = 0
    while made < size:
        n = min(BATCH, size - made)
        per_doc = rng.integers(1, 8, size=n)  # more than needed; cut below
        ends = np.cumsum(per_doc)
        docs = int(np.searchsorted(ends, n, side="left")) + 1
        per_doc = per_doc[:docs]
        per_doc[-1] -= int(ends[docs - 1] - n)
        doc_of_chunk = np.repeat(np.arange(docs), per_doc)
        ordinal = np.concatenate([np.arange(k) for k in per_doc]).astype(np.int32)
        base_of_doc = rng.integers(0, len(material.vectors), size=docs)
        # A document's chunks come from consecutive real chunks (same topic).
        base = (base_of_doc[doc_of_chunk] + ordinal) % len(material.vectors)
        vectors = synthetic_vectors(material.vectors, base, rng)
        texts = synthetic_texts(material, base, rng)
        doc_ids = _hex_ids("doc", doc_no, docs)
        source_of_doc = rng.choice(len(SOURCES), size=docs, p=SOURCE_SHARE)
        sources = [SOURCES[s] for s in source_of_doc]
        paths = [f"{sources[i]}/{i % 97:02d}/note-{doc_no + i}.md" for i in range(docs)]
        titles = [material.titles[b % len(material.titles)][:120] for b in base_of_doc]
        tag_sets = [
            sorted({TAGS[t] for t in rng.integers(0, len(TAGS), size=rng.integers(0, 3))})
            for _ in range(docs)
        ]
        modified = [epoch + timedelta(minutes=int(m)) for m in rng.integers(0, 1_000_000, docs)]
        now = datetime.now(UTC)
        chunk_ids = _hex_ids("chunk", made, n)
        d = doc_of_chunk
        chunks = pa.table(
            {
                "chunk_id": chunk_ids,
                "doc_id": [doc_ids[i] for i in d],
                "source": [sources[i] for i in d],
                "kind": ["markdown"] * n,
                "path": [paths[i] for i in d],
                "title": [titles[i] for i in d],
                "heading": [titles[i] for i in d],
                "anchor": [titles[i] for i in d],
                "ordinal": ordinal,
                "line_start": ordinal * 10 + 1,
                "line_end": ordinal * 10 + 9,
                "text": texts,
                "embed_hash": chunk_ids,
                "tags": [tag_sets[i] for i in d],
                "modified": [modified[i] for i in d],
                "indexed_at": [now] * n,
                "row_hash": chunk_ids,
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
                "facets": [["type:md"]] * n,
            },
            schema=chunk_schema,
        )
        documents = pa.table(
            {
                "doc_id": doc_ids,
                "source": sources,
                "kind": ["markdown"] * docs,
                "path": paths,
                "title": titles,
                "aliases": [[] for _ in range(docs)],
                "tags": tag_sets,
                "links_json": ["[]"] * docs,
                "frontmatter_json": ["{}"] * docs,
                "modified": modified,
                "content_hash": doc_ids,
                "body": [""] * docs,  # not read by search; kept empty to save time
                "body_start_line": [1] * docs,
                "warnings": [[] for _ in range(docs)],
                "indexed_at": [now] * docs,
                "file_type": ["md"] * docs,
                "facets": [["type:md"] for _ in range(docs)],
            }
        )
        files = pa.table(
            {
                "doc_id": doc_ids,
                "source": sources,
                "path": paths,
                "size": rng.integers(200, 20_000, docs),
                "mtime_ns": [int(m.timestamp() * 1e9) for m in modified],
                "content_hash": doc_ids,
                "seen_at": [now] * docs,
            }
        )
        yield Batches(
            chunks,
            _conform(documents, schema.DOCUMENTS),
            _conform(files, schema.FILES),
        )
        made += n
        doc_no += docs


def _conform(table: pa.Table, target: pa.Schema) -> pa.Table:
    """``table`` with ``target``'s columns (missing ones null) and types."""
    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in target
    ]
    return pa.Table.from_arrays(columns, schema=target)


# ---- building an index ----------------------------------------------------------


def fingerprint_for(dim: int) -> Any:
    """The bundled model's fingerprint (what ``ragline index`` would record)."""
    from rag_serving.index.fingerprint import EmbedderFingerprint

    return EmbedderFingerprint("sentence-transformers", "all-MiniLM-L6-v2", dim)


def build_index(data_dir: Path, material: RealMaterial, size: int) -> dict[str, float]:
    """Write a synthetic index of ``size`` chunks at ``data_dir``; returns timings."""
    from rag_serving.index import schema
    from rag_serving.index.fulltext import FulltextIndex
    from rag_serving.index.manifest import Generation, IndexManifest, write_manifest
    from rag_serving.index.store import IndexStore

    shutil.rmtree(data_dir, ignore_errors=True)
    dim = material.vectors.shape[1]
    generation = Generation(fingerprint_for(dim), datetime.now(UTC).isoformat())
    store = IndexStore(data_dir)
    chunks = store.chunks(generation.table, dim)
    documents, files = store.documents(), store.files()
    timings = {"lancedb_write_s": 0.0, "generate_s": 0.0}

    def rows() -> Iterator[dict[str, Any]]:
        started = time.perf_counter()
        for batch in synthetic_batches(material, size, dim):
            timings["generate_s"] += time.perf_counter() - started
            started = time.perf_counter()
            chunks.add(batch.chunks)
            documents.add(batch.documents)
            files.add(batch.files)
            timings["lancedb_write_s"] += time.perf_counter() - started
            yield from batch.chunks.drop_columns(["vector"]).to_pylist()
            started = time.perf_counter()

    started = time.perf_counter()
    FulltextIndex.rebuild(store.layout.fulltext_dir(generation.key), rows())
    total = time.perf_counter() - started
    timings["tantivy_s"] = total - timings["generate_s"] - timings["lancedb_write_s"]
    started = time.perf_counter()
    for table in (chunks, documents, files):
        table.optimize(cleanup_older_than=timedelta(0))  # one compacted version, as maintained
    timings["compact_s"] = time.perf_counter() - started
    now = datetime.now(UTC).isoformat()
    write_manifest(
        store.layout.manifest_path, IndexManifest(schema.SCHEMA_VERSION, generation, None, now)
    )
    return {k: round(v, 1) for k, v in timings.items()}


# ---- measuring -------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def stats(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1)}


def real_queries(count: int) -> list[str]:
    """Question-like queries from the BEIR sets, the same share of each."""
    import random

    per_set = -(-count // len(EVAL_SETS))
    queries: list[str] = []
    for name in EVAL_SETS:
        path = SHARED_DATA / "eval" / name / "queries.jsonl"
        lines = [json.loads(line)["text"] for line in path.read_text().splitlines() if line]
        random.Random(5).shuffle(lines)
        queries.extend(lines[:per_set])
    random.Random(6).shuffle(queries)
    return queries[:count]


def write_config(data_dir: Path) -> Path:
    """A ragline.toml for the synthetic index (its sources point at empty folders, so
    the staleness check stats a file per hit as it would for real notes)."""
    import tomli_w

    vault = data_dir / "vault"
    for source in SOURCES:
        (vault / source).mkdir(parents=True, exist_ok=True)
    path = data_dir / "ragline.toml"
    path.write_bytes(
        tomli_w.dumps(
            {
                "data_dir": str(data_dir),
                "embedder": {"provider": "sentence-transformers", "query_backend": "onnx"},
                "sources": [
                    {"name": s, "kind": "markdown", "path": str(vault / s)} for s in SOURCES
                ],
            }
        ).encode()
    )
    return path


def provide_query_encoder(engine: Any) -> None:
    """Reuse the ONNX query encoder an eval index already exported (same model), so
    queries never load PyTorch; else export it once."""
    data_dir, key = engine.config.data_dir, engine.generation.key
    target = data_dir / "models" / key
    for name in EVAL_SETS:
        found = EVAL_ROOT / name / "index" / "models" / key
        if found.is_dir() and any(found.iterdir()):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(found, target, dirs_exist_ok=True, copy_function=_link_or_copy)
            return
    engine.embedder.prepare_query_path()


def _link_or_copy(src: str, dst: str) -> None:
    import os

    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def timed(fn: Any, items: list[Any]) -> tuple[list[float], list[Any]]:
    """Milliseconds per call of ``fn`` on each item, and the results."""
    times, results = [], []
    for item in items:
        started = time.perf_counter()
        results.append(fn(item))
        times.append((time.perf_counter() - started) * 1000)
    return times, results


MODES = ("hybrid", "vector", "bm25", "vector+filter")


def measure_modes(engine: Any, queries: list[str]) -> tuple[dict[str, Any], dict[str, list]]:
    """p50/p95 of each mode over ``queries`` (k = 10), and the hit ids per query."""
    from rag_serving.index.filters import SearchFilters

    narrow = SearchFilters(sources=(SOURCES[-1],))  # the smallest source (~5% of chunks)
    out, ids = {}, {}
    for mode in MODES:
        if mode == "vector+filter":
            call = lambda q: engine.search(q, k=10, mode="vector", filters=narrow)  # noqa: E731
        else:
            call = lambda q, m=mode: engine.search(q, k=10, mode=m)  # noqa: E731
        times, results = timed(call, queries)
        out[mode] = stats(times)
        ids[mode] = [[h.chunk_id for h in r.hits] for r in results]
    return out, ids


def recall_at_10(found: list[list[str]], exact: list[list[str]]) -> float:
    pairs = [(f, e) for f, e in zip(found, exact, strict=True) if e]
    return round(
        sum(len(set(f[:10]) & set(e[:10])) / len(e[:10]) for f, e in pairs) / len(pairs), 3
    )


def warm(engine: Any, queries: list[str]) -> None:
    """One unmeasured hybrid pass over every query: the model, the page cache, the
    Tantivy postings and the index partitions these queries touch are then warm, as
    in a long-running search process."""
    for q in queries:
        engine.search(q, k=10, mode="hybrid")


def measure_size(
    root: Path, material: RealMaterial, size: int, queries: list[str]
) -> tuple[dict[str, Any], Any]:
    """Build, then measure flat and indexed; returns the results and the chunks table."""
    from rag_serving.config import parse_config_file
    from rag_serving.index.ann import ensure_search_indexes, find_vector_index
    from rag_serving.search import SearchEngine

    data_dir = root / str(size)
    print(f"[{size}] building…", flush=True)
    started = time.perf_counter()
    build = build_index(data_dir, material, size)
    build["total_s"] = round(time.perf_counter() - started, 1)
    print(f"[{size}] built: {build}", flush=True)
    engine = SearchEngine(parse_config_file(write_config(data_dir)))
    provide_query_encoder(engine)
    table = engine.store.chunks(engine.generation.table)
    warm(engine, queries)
    result: dict[str, Any] = {"chunks": size, "build": build}
    result["flat"], flat_ids = measure_modes(engine, queries)
    print(f"[{size}] flat: {result['flat']}", flush=True)

    report = ensure_search_indexes(engine.store, engine.generation.table)
    result["ensure"] = report
    result["indexes"] = sorted(ix.name for ix in table.list_indices())
    vector = re.search(r"vector \(([\d.]+) s\)", report["actions"])
    result["vector_index_build_s"] = float(vector.group(1)) if vector else None
    scalar = re.findall(r"btree [\w.]+ \(([\d.]+) s\)", report["actions"])
    result["scalar_index_build_s"] = round(sum(float(s) for s in scalar), 2) if scalar else None
    print(f"[{size}] ensure_search_indexes: {report}", flush=True)
    if report["actions"] == "none":
        result["indexed"] = None  # below every threshold: search stays flat
    else:
        warm(engine, queries)
        result["indexed"], indexed_ids = measure_modes(engine, queries)
        index = find_vector_index(table)
        if index is not None:
            result["vector_index"] = {"partitions": index.partitions, "nprobes": index.nprobes}
            result["recall_at_10"] = {
                "vector": recall_at_10(indexed_ids["vector"], flat_ids["vector"]),
                "vector+filter": recall_at_10(
                    indexed_ids["vector+filter"], flat_ids["vector+filter"]
                ),
            }
        print(f"[{size}] indexed: {result['indexed']} {result.get('recall_at_10')}", flush=True)
    # The bare components of the searches as served (indexed when the size has an
    # index, else flat), same queries, same warm process.
    result["bare"] = bare_components(engine, queries)
    served = result.get("indexed") or result["flat"]
    result["p50_vs_bare"] = {
        mode: {
            "in_sequence": round(
                served[mode]["p50"] / result["bare"]["in_sequence_p50_ms"][mode], 2
            ),
            "isolated": round(served[mode]["p50"] / result["bare"]["isolated_sum_p50_ms"][mode], 2),
        }
        for mode in ("hybrid", "vector", "bm25")
    }
    print(f"[{size}] bare: {result['bare']} {result['p50_vs_bare']}", flush=True)
    return result, table


def markdown(results: list[dict[str, Any]], queries: int) -> str:
    """One table (size × mode, flat vs indexed) and the same-run ratios."""
    lines = [
        f"Synthetic chunks (real MiniLM vectors mixed with noise, real-vocabulary text; "
        f"see the script), {queries} real BEIR queries per mode, k = 10, one warm "
        "`SearchEngine`, after one unmeasured pass over the queries. *Flat*: no index; *indexed*: after `ensure_search_indexes` with "
        "the default thresholds. `vector+filter`: vector search with a source filter "
        "matching ~5% of chunks (prefilter).",
        "",
        "| chunks | mode | flat p50 / p95 ms | indexed p50 / p95 ms | flat ÷ indexed p50 "
        "| recall@10 vs exact | index build s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for i, mode in enumerate(MODES):
            flat = r["flat"][mode]
            indexed = (r.get("indexed") or {}).get(mode)
            cells = [f"{r['chunks']:,}" if i == 0 else "", f"`{mode}`",
                     f"{flat['p50']} / {flat['p95']}"]  # fmt: skip
            if indexed is None:
                cells += ["— (below the thresholds: stays flat)", "", "", ""]
            else:
                recall = r.get("recall_at_10", {}).get(mode, "")
                build = ""
                if i == 0:
                    build = f"vector {r['vector_index_build_s']}, btree {r['scalar_index_build_s']}"
                cells += [
                    f"{indexed['p50']} / {indexed['p95']}",
                    f"{flat['p50'] / max(indexed['p50'], 0.01):.1f}×",
                    str(recall),
                    build,
                ]
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "Searches as served (indexed where the size has an index) against their bare "
        "components in the same run (benchmarks/yardsticks.py: the same library calls "
        "without ragline's search layer, at the depths a search asks for; *in sequence*: "
        "one query's components back to back; *isolated*: each over all queries first):",
        "",
        "| chunks | mode | p50 ms | bare in sequence / isolated p50 ms | p50 ÷ bare in sequence "
        "| p50 ÷ bare isolated |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        served, bare = r.get("indexed") or r["flat"], r["bare"]
        for i, mode in enumerate(("hybrid", "vector", "bm25")):
            ratio = r["p50_vs_bare"][mode]
            lines.append(f"| {r['chunks']:,} |" if i == 0 else "| |")
            lines[-1] += (
                f" `{mode}` | {served[mode]['p50']} | {bare['in_sequence_p50_ms'][mode]} / "
                f"{bare['isolated_sum_p50_ms'][mode]} | **{ratio['in_sequence']}** | "
                f"{ratio['isolated']} |"
            )
    lines += ["", "Bare components, isolated p50 ms, and the synthetic index builds:", ""]
    for r in results:
        parts = ", ".join(f"{name} {ms}" for name, ms in r["bare"]["isolated_p50_ms"].items())
        lines.append(
            f"- {r['chunks']:,} chunks: {parts}. Build: {r['build']['total_s']} s "
            f"(generate {r['build']['generate_s']}, LanceDB {r['build']['lancedb_write_s']}, "
            f"Tantivy {r['build']['tantivy_s']}, compact {r['build']['compact_s']})."
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--data-root", type=Path, default=Path("/tmp/ragline-scale"))
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--no-save", action="store_true", help="print, do not write results")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    import warnings

    warnings.filterwarnings("ignore", message=".*cleanup_older_than.*")
    started = time.perf_counter()
    material = load_real()
    queries = real_queries(args.queries)
    print(f"real material: {len(material.vectors)} vectors, {len(material.vocabulary)} words")
    results = []
    for size in sorted(sizes):
        result, _table = measure_size(args.data_root, material, size, queries)
        results.append(result)
    data = {"sizes": sizes, "queries": len(queries), "total_s": 0.0, "results": results}
    data["total_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(data, indent=2, default=str))
    table = markdown(results, len(queries))
    if args.no_save:
        print(table)
    else:
        command = f"python benchmarks/scale_latency.py --sizes {args.sizes}"
        save("scale_latency", data, table, command)


if __name__ == "__main__":
    main()
