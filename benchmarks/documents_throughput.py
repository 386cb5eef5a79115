"""Index all of corpora/pdf and corpora/epub as `documents` sources through the
Dagster job, and measure, in the same run:

- pages (PDF) and chapters (EPUB) per second, empty → indexed, per corpus;
- the share of wall time inside the embedder, and inside the parsers;
- the pipeline's chunks/s against the bare embedder on a sample of the same chunks;
- peak RSS of the process against its RSS with the model loaded (the baseline);
- OCR seconds per page: real paper pages rendered to images (no text layer) and
  read back with Tesseract, with the word recall against the pages' own text.

The main runs use ``ocr = "off"`` (the goal is about parsing outside OCR'd pages);
OCR is measured on its own.

    python benchmarks/documents_throughput.py [--data-dir DIR] [--ocr-pages 4]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import SHARED_DATA, save

CORPORA = {"pdf": SHARED_DATA / "corpora" / "pdf", "epub": SHARED_DATA / "corpora" / "epub"}
OCR_PAPER = SHARED_DATA / "corpora" / "pdf" / "papers" / "2304.02623v1.pdf"


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _ocr_seconds_per_page(pages: int) -> dict[str, float]:
    """Render real paper pages to images, OCR them through the PDF parser."""
    import pymupdf

    from rag_sources.formats.model import ParseOptions
    from rag_sources.formats.router import parse_file

    work = Path(tempfile.mkdtemp(prefix="ragline-ocr-"))
    source = pymupdf.open(OCR_PAPER)
    scanned = pymupdf.open()
    truth: list[str] = []
    for number in range(min(pages, source.page_count)):
        page = source[number]
        truth.append(page.get_text())
        image = scanned.new_page(width=page.rect.width, height=page.rect.height)
        image.insert_image(image.rect, pixmap=page.get_pixmap(dpi=200))
    path = work / "scanned.pdf"
    scanned.save(str(path))
    started = time.perf_counter()
    document = parse_file(path, "scanned.pdf", "pdf", ParseOptions(allow_deferred_work=True))
    seconds = time.perf_counter() - started
    words = lambda text: set(re.findall(r"[a-z]{3,}", text.lower()))  # noqa: E731
    expected = words(" ".join(truth))
    recall = len(expected & words(document.body)) / max(len(expected), 1)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "ocr_pages": len(truth),
        "ocr_seconds_per_page": round(seconds / max(len(truth), 1), 2),
        "ocr_word_recall": round(recall, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--ocr-pages", type=int, default=4)
    parser.add_argument("--bare-sample", type=float, default=0.1)
    args = parser.parse_args()

    import tomli_w

    from rag_assets import resources
    from rag_serving.config import parse_config_file
    from rag_serving.index.manifest import read_manifest
    from rag_serving.index.store import IndexStore
    from rag_sources.kinds.files import FileSourceKind
    from ragline.indexing import index_sources

    work = Path(tempfile.mkdtemp(prefix="ragline-docs-bench-"))
    data_dir = (args.data_dir or work / "data").resolve()
    shutil.rmtree(data_dir, ignore_errors=True)
    config_path = work / "ragline.toml"
    sources = [
        {"name": name, "kind": "documents", "path": str(path), "ocr": "off"}
        for name, path in CORPORA.items()
    ]
    config_path.write_bytes(tomli_w.dumps({"data_dir": str(data_dir), "sources": sources}).encode())
    config = parse_config_file(config_path)

    embedder = resources._embedder(config.embedder.model_dump_json(), str(config.data_dir))
    inner = embedder.embed_documents
    spent = {"embed": 0.0, "parse": 0.0}

    def timed_embed(texts):
        started = time.perf_counter()
        out = inner(texts)
        spent["embed"] += time.perf_counter() - started
        return out

    embedder.embed_documents = timed_embed  # type: ignore[method-assign]
    parse = FileSourceKind.parse

    def timed_parse(self, key, options):
        started = time.perf_counter()
        try:
            return parse(self, key, options)
        finally:
            spent["parse"] += time.perf_counter() - started

    FileSourceKind.parse = timed_parse  # type: ignore[method-assign]
    inner(["load the model (and make the ONNX export) before the clock starts"])
    baseline_rss = _rss_mib()

    rows: dict[str, dict] = {}
    for name in CORPORA:
        spent.update(embed=0.0, parse=0.0)
        started = time.perf_counter()
        [outcome] = index_sources(config, [name], full=False)
        wall = time.perf_counter() - started
        assert outcome.success, outcome.error
        store = IndexStore(data_dir)  # a fresh handle sees the run's commits
        generation = read_manifest(store.layout.manifest_path).active
        scope = f"source = '{name}'"
        docs = store.read("documents", where=scope, columns=["sections_json", "body"]).to_pylist()
        parts = [s for d in docs for s in json.loads(d["sections_json"] or "[]")]
        words = sum(len((d["body"] or "").split()) for d in docs)
        chunks = store.count(generation.table, scope)
        parsed = outcome.metadata["parsed_documents"]
        rows[name] = {
            "files": outcome.metadata["raw_files"]["dagster/row_count"],
            "documents": len(docs),
            "failed_or_skipped": parsed["failed"] + parsed["skipped"],
            "parts": len(parts),  # pages or chapters
            "words": words,
            "chunks": chunks,
            "wall_s": round(wall, 1),
            "parts_per_s": round(len(parts) / wall, 2),
            "chunks_per_s": round(chunks / wall, 1),
            "embedder_s": round(spent["embed"], 1),
            "embedder_share": round(spent["embed"] / wall, 3),
            "parse_s": round(spent["parse"], 1),
            "parse_share": round(spent["parse"] / wall, 3),
        }
        print(name, rows[name], flush=True)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    store = IndexStore(data_dir)
    texts = store.read("staged_chunks", columns=["embed_text"]).column("embed_text").to_pylist()
    sample = random.Random(42).sample(texts, max(1, int(len(texts) * args.bare_sample)))
    started = time.perf_counter()
    inner(sample)
    bare_rate = len(sample) / (time.perf_counter() - started)
    total_chunks = sum(r["chunks"] for r in rows.values())
    total_wall = sum(r["wall_s"] for r in rows.values())
    ocr = _ocr_seconds_per_page(args.ocr_pages)
    data = {
        "corpora": rows,
        "peak_rss_mib": round(peak_rss),
        "baseline_rss_mib": round(baseline_rss),
        "bare_sample_chunks": len(sample),
        "bare_chunks_per_s": round(bare_rate, 1),
        "pipeline_chunks_per_s": round(total_chunks / total_wall, 1),
        "pipeline_vs_bare_throughput": round(total_chunks / total_wall / bare_rate, 3),
        **ocr,
    }
    print(json.dumps(data, indent=2))
    lines = [
        "| corpus | files | documents | failed or skipped | pages / chapters | words | chunks "
        "| wall | pages or chapters/s | embedder share | parser share |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['files']} | {r['documents']} | {r['failed_or_skipped']} | "
            f"{r['parts']} | {r['words']:,} | {r['chunks']} | {r['wall_s']} s | "
            f"{r['parts_per_s']} | **{r['embedder_share']:.0%}** | {r['parse_share']:.1%} |"
        )
    lines += [
        "",
        "| measure | value |",
        "|---|---|",
        f"| pipeline chunks/s (both corpora) | {data['pipeline_chunks_per_s']} |",
        f"| bare embedder, {len(sample)} of the same chunks | {data['bare_chunks_per_s']} chunks/s |",
        f"| **pipeline / bare embedder throughput** | **{data['pipeline_vs_bare_throughput']:.2f}** |",
        f"| RSS with the model loaded (baseline) | {data['baseline_rss_mib']} MiB |",
        f"| **peak RSS indexing both corpora** | **{data['peak_rss_mib']} MiB** "
        f"({data['peak_rss_mib'] / data['baseline_rss_mib']:.2f}× the baseline) |",
        f"| OCR (Tesseract through PyMuPDF, 200 dpi), {ocr['ocr_pages']} rendered paper pages "
        f"| **{ocr['ocr_seconds_per_page']} s/page**, word recall {ocr['ocr_word_recall']} |",
    ]
    save(
        "documents_throughput",
        data,
        "\n".join(lines),
        "make bench-documents (python benchmarks/documents_throughput.py)",
    )


if __name__ == "__main__":
    main()
