"""Known-item search in Japanese, Arabic and Hindi (issue 14): ragline's modes beside a
character-bigram BM25 baseline computed in the same run over the same chunks.

The chapters of the Japanese, Arabic and Devanagari EPUBs in ../shared/data/corpora/epub
become one Markdown note each (one vault per language; the Mahabharata's first
chapters only, so that embedding stays within minutes). A query is a 4-8 character
piece of one sentence that occurs in exactly one chapter: any substring for Japanese
(no spaces), whole words for Arabic and Hindi (a person types words, not pieces of
them). The relevant document is the chapter; chunk hits collapse to their chapter's
best rank. Reported: MRR@10 and hit@10 per mode, and for the baseline (pure Python,
k1 = 1.2, b = 0.75, character bigrams of the chunk text, chunk scores collapsed to
chapters). For Japanese also the same BM25 over the words of a morphological tokenizer
(SudachiPy with sudachidict_core, split mode A, and Janome; "bigrams vs morphological",
issue 14 item 1), with each tokenizer's speed; rows for a tokenizer that is not
installed are left out with a note (`pip install sudachipy sudachidict_core janome`).

With ``--reuse`` a language whose chapters are unchanged since the last run in the same
``--work`` directory keeps its vault files as they are (same mtimes), so the index run
is a no-op apart from what a new ragline asks for (a changed keyword analysis rebuilds
the full-text side from the stored chunks; no chunk is embedded again) and the run only
re-queries.

    python benchmarks/multilingual_known_item.py [--work DIR] [--reuse] [--queries 100] [--save]
"""

from __future__ import annotations

import argparse
import hashlib
import html
import math
import random
import re
import shutil
import sys
import time
import unicodedata
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import SHARED_DATA, save

EPUBS = SHARED_DATA / "corpora" / "epub"
HINDI_CHAPTERS = 6
SENTENCE_END = re.compile(r"(?<=[。！？!?.؟।])")
_TAG = re.compile(r"<[^>]+>")
_RUBY = re.compile(r"<rt>.*?</rt>|<rp>.*?</rp>", re.S)
_HEADING = re.compile(r"<h[12][^>]*>(.*?)</h[12]>", re.S)


def _text(markup: str, spaced: bool) -> str:
    body = _RUBY.sub("", markup.split("<body", 1)[-1])
    text = html.unescape(_TAG.sub(" ", body.split(">", 1)[-1]))
    return " ".join(text.split()) if spaced else "".join(text.split())


def chapters(language: str) -> dict[str, str]:
    """Chapter title → text, in book order."""
    if language == "ja":
        book = zipfile.ZipFile(EPUBS / "kusamakura-japanese-vertical-writing.epub")
        names = ["一", "二", "三", "四", "五", "六", "七", "八", "九", "十", "十一", "十二", "十三"]
        return {
            f"草枕 {n}": _text(book.read(f"OPS/xhtml/{n}.xhtml").decode(), False)
            for n in names
            if f"OPS/xhtml/{n}.xhtml" in book.namelist()
        }
    if language == "ar":
        book = zipfile.ZipFile(EPUBS / "regime-anticancer-arabic.epub")
        markup = book.read("EPUB/Content/C_content.xhtml").decode()
        parts = _HEADING.split(markup)  # [before, heading, body, heading, body, …]
        out = {}
        for i in range(1, len(parts) - 1, 2):
            title = " ".join(_TAG.sub(" ", parts[i]).split()) or f"part {i}"
            text = _text("<body>" + parts[i + 1], True)
            if len(text) > 200:
                out[f"{len(out) + 1:02d} {title}"[:80]] = text
        return out
    book = zipfile.ZipFile(EPUBS / "mahabharata.epub")
    return {
        f"अध्याय {i}": _text(book.read(f"EPUB/xhtml/b0100{i}.xhtml").decode(), True)
        for i in range(1, HINDI_CHAPTERS + 1)
    }


def make_queries(texts: dict[str, str], language: str, count: int, seed: int) -> list[tuple]:
    """(query, chapter) pairs: 4-8 characters of one sentence found in one chapter only."""
    rng = random.Random(seed)
    names = list(texts)
    out: list[tuple[str, str]] = []
    tries = 0
    while len(out) < count and tries < count * 200:
        tries += 1
        name = rng.choice(names)
        sentences = [s for s in SENTENCE_END.split(texts[name]) if len(s.strip()) >= 8]
        if not sentences:
            continue
        sentence = rng.choice(sentences).strip()
        if language == "ja":
            size = rng.randint(4, 8)
            start = rng.randint(0, max(0, len(sentence) - size))
            query = sentence[start : start + size]
            if sum(ch.isalpha() for ch in query) < 4:
                continue
        else:
            words = [w.strip(".,;:!?؟،«»()[]\"'।॥0123456789१२३४५६७८९०") for w in sentence.split()]
            words = [w for w in words if w]
            if not words:
                continue
            first = rng.randrange(len(words))
            query = words[first]
            if len(query) < 4 and first + 1 < len(words):
                query = f"{query} {words[first + 1]}"
            if not 4 <= len(query) <= 8 + 1:
                continue
        if sum(query in t for t in texts.values()) != 1 or (query, name) in out:
            continue
        out.append((query, name))
    return out


class TokenBM25:
    """BM25 (k1, b) over the tokens ``tokenize`` makes of each chunk text."""

    def __init__(
        self,
        docs: dict[str, str],
        tokenize: Callable[[str], list[str]],
        k1: float = 1.2,
        b: float = 0.75,
    ):
        self.k1, self.b, self.tokenize = k1, b, tokenize
        self.tf = {d: Counter(tokenize(t)) for d, t in docs.items()}
        self.length = {d: sum(c.values()) for d, c in self.tf.items()}
        self.avg = sum(self.length.values()) / max(1, len(self.length))
        df: Counter[str] = Counter()
        for counts in self.tf.values():
            df.update(counts.keys())
        n = len(self.tf)
        self.idf = {g: math.log(1 + (n - f + 0.5) / (f + 0.5)) for g, f in df.items()}
        self.postings: dict[str, list[str]] = defaultdict(list)
        for d, counts in self.tf.items():
            for g in counts:
                self.postings[g].append(d)

    def search(self, query: str, limit: int) -> list[str]:
        scores: Counter[str] = Counter()
        for g in set(self.tokenize(query)):
            idf = self.idf.get(g)
            if idf is None:
                continue
            for d in self.postings[g]:
                tf = self.tf[d][g]
                norm = tf + self.k1 * (1 - self.b + self.b * self.length[d] / self.avg)
                scores[d] += idf * tf * (self.k1 + 1) / norm
        return [d for d, _s in scores.most_common(limit)]


def bigrams(text: str) -> list[str]:
    """Character bigrams of the letters, digits and marks of ``text`` (the baseline)."""
    chars = "".join(
        ch for ch in text.lower() if ch.isalnum() or unicodedata.category(ch).startswith("M")
    )
    return [chars[i : i + 2] for i in range(len(chars) - 1)] or ([chars] if chars else [])


class BigramBM25(TokenBM25):
    """Character-bigram BM25 over chunk texts (the baseline)."""

    def __init__(self, docs: dict[str, str], k1: float = 1.2, b: float = 0.75):
        super().__init__(docs, bigrams, k1, b)


def chars_per_second(tokenize: Callable[[str], list[str]], texts: list[str]) -> int:
    """Tokenizing speed over ``texts``: the best of 3 passes (the cores are shared)."""
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        for text in texts:
            tokenize(text)
        best = min(best, time.perf_counter() - started)
    return round(sum(map(len, texts)) / max(best, 1e-9))


def _words(surfaces: list[str]) -> list[str]:
    """Lower-cased tokens with a letter or digit (punctuation and spaces dropped)."""
    return [w.lower() for w in surfaces if any(ch.isalnum() for ch in w)]


def morphological_tokenizers() -> tuple[dict[str, Callable[[str], list[str]]], list[str]]:
    """Japanese word tokenizers that are installed (name → tokenize), and notes on the
    ones that are not."""
    found: dict[str, Callable[[str], list[str]]] = {}
    missing: list[str] = []
    try:
        from sudachipy import Dictionary, SplitMode

        sudachi = Dictionary(dict="core").tokenizer(SplitMode.A)

        def sudachi_words(text: str) -> list[str]:
            # Sudachi refuses inputs over 49,149 bytes: tokenize in pieces.
            return _words([m.surface() for i in range(0, len(text), 4000)
                           for m in sudachi.tokenize(text[i : i + 4000])])  # fmt: skip

        found["morphological BM25 (SudachiPy core, mode A)"] = sudachi_words
    except ImportError:
        missing.append("SudachiPy (pip install sudachipy sudachidict_core)")
    try:
        from janome.tokenizer import Tokenizer

        janome = Tokenizer(wakati=True)
        found["morphological BM25 (Janome)"] = lambda text: _words(list(janome.tokenize(text)))
    except ImportError:
        missing.append("Janome (pip install janome)")
    return found, missing


def corpus_digest(texts: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name, text in texts.items():
        digest.update(f"{name}\0{text}\0".encode())
    return digest.hexdigest()


def index_language(work: Path, language: str, texts: dict[str, str], reuse: bool) -> tuple:
    """Write the chapters as notes and index them; with ``reuse``, an unchanged corpus
    keeps its notes (and so its index) from the last run. Returns (config, note path →
    chapter, index seconds, whether the notes were reused)."""
    from rag_serving.config import parse_config_file
    from ragline.indexing import index_sources

    vault = work / language / "vault"
    marker = work / language / "corpus.sha256"
    paths = {f"{i:03d}.md": name for i, name in enumerate(texts)}
    digest = corpus_digest(texts)
    reused = (
        reuse
        and marker.is_file()
        and marker.read_text().strip() == digest
        and all((vault / path).is_file() for path in paths)
    )
    if not reused:
        marker.unlink(missing_ok=True)
        shutil.rmtree(vault, ignore_errors=True)
        vault.mkdir(parents=True)
        for path, name in paths.items():
            (vault / path).write_text(f"# {name}\n\n{texts[name]}\n", encoding="utf-8")
    config_path = work / language / "ragline.toml"
    config_path.write_text(
        f'data_dir = "{work / language / "data"}"\n\n[[sources]]\nname = "{language}"\n'
        f'kind = "markdown"\npath = "{vault}"\n',
        encoding="utf-8",
    )
    config = parse_config_file(config_path)
    started = time.perf_counter()
    # Also when reused: a no-op for unchanged notes, except that a full-text side an
    # older keyword analysis wrote is rebuilt from the stored chunks.
    outcomes = index_sources(config, [], full=False)
    assert all(o.success for o in outcomes), [o.error for o in outcomes]
    marker.write_text(digest + "\n")
    return config, paths, time.perf_counter() - started, reused


def evaluate(rankings: list[list[str]], relevant: list[str]) -> dict[str, float]:
    rr, hit = [], []
    for ranking, target in zip(rankings, relevant, strict=True):
        top = ranking[:10]
        rr.append(1 / (top.index(target) + 1) if target in top else 0.0)
        hit.append(1.0 if target in top else 0.0)
    return {"mrr@10": round(sum(rr) / len(rr), 4), "hit@10": round(sum(hit) / len(hit), 4)}


def chapter_rankings(
    bm25: TokenBM25, queries: list[tuple[str, str]], chunk_chapter: dict[str, str]
) -> list[list[str]]:
    """Each query's chapters in the order of their best chunk."""
    return [list(dict.fromkeys(chunk_chapter[c] for c in bm25.search(q, 50))) for q, _c in queries]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", type=Path, default=Path("/tmp/ragline-multilingual"))
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the notes (and so the index) of an unchanged corpus from the last run",
    )
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--save", action="store_true")
    args = parser.parse_args()
    from rag_serving.search import SearchEngine

    results: dict[str, dict] = {}
    tokenizer_notes: list[str] = []
    for language in ("ja", "ar", "hi"):
        texts = chapters(language)
        config, paths, seconds, reused = index_language(args.work, language, texts, args.reuse)
        engine = SearchEngine(config)
        queries = make_queries(texts, language, args.queries, seed=14)
        chunks = engine.store.read(engine.generation.table, columns=["chunk_id", "path", "text"])
        chunk_text = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("text").to_pylist(), strict=True))  # fmt: skip
        chunk_chapter = {c: paths[p] for c, p in zip(chunks.column("chunk_id").to_pylist(), chunks.column("path").to_pylist(), strict=True)}  # fmt: skip
        row: dict[str, dict[str, float]] = {}
        relevant = [chapter for _q, chapter in queries]
        for mode in ("hybrid", "bm25", "vector"):
            rankings = []
            for query, _chapter in queries:
                hits = engine.search(query, k=50, mode=mode).hits  # type: ignore[arg-type]
                rankings.append(list(dict.fromkeys(paths[h.path] for h in hits)))
            row[mode] = evaluate(rankings, relevant)
        baseline = BigramBM25(chunk_text)
        row["char-bigram BM25 baseline"] = evaluate(
            chapter_rankings(baseline, queries, chunk_chapter), relevant
        )
        chars = sum(len(t) for t in chunk_text.values())
        tokenization = {"char-bigram": {"chars_per_s": chars_per_second(bigrams, list(chunk_text.values()))}}  # fmt: skip
        if language == "ja":
            found, missing = morphological_tokenizers()
            tokenizer_notes += [f"not installed: {m}" for m in missing]
            for name, tokenize in found.items():
                bm25 = TokenBM25(chunk_text, tokenize)
                row[name] = evaluate(chapter_rankings(bm25, queries, chunk_chapter), relevant)
                tokenization[name.split("(", 1)[1].rstrip(")")] = {
                    "chars_per_s": chars_per_second(tokenize, list(chunk_text.values())),
                    "tokens": sum(bm25.length.values()),
                }
        results[language] = {
            "chapters": len(texts),
            "chunks": len(chunk_text),
            "chunk_chars": chars,
            "queries": len(queries),
            "index_seconds": round(seconds, 1),
            "index_reused": reused,
            "examples": [q for q, _c in queries[:3]],
            "modes": row,
            "tokenization": tokenization,
        }
        print(language, results[language], flush=True)
    names = {
        "ja": "Japanese (草枕)",
        "ar": "Arabic",
        "hi": f"Hindi (Mahabharata, {HINDI_CHAPTERS} chapters)",
    }
    lines = [
        "Known-item queries (4-8 characters of one sentence, found in one chapter only; whole "
        "words for Arabic and Hindi), the chapter as the relevant document, 100 per language, "
        "seed 14. Each chapter is one note (the Mahabharata's first chapters only). The "
        "baseline is a pure-Python character-bigram BM25 over the same chunks (k1 1.2, "
        "b 0.75, a chunk's score counts for its chapter); for Japanese also the same BM25 "
        "over the words of a morphological tokenizer.",
        "",
        "| language | chapters / chunks | mode | MRR@10 | hit@10 |",
        "|---|---|---|---|---|",
    ]
    for language, data in results.items():
        for mode, scores in data["modes"].items():
            lines.append(
                f"| {names[language]} | {data['chapters']} / {data['chunks']} | {mode} | "
                f"{scores['mrr@10']} | {scores['hit@10']} |"
            )
    ja = results["ja"]["tokenization"]
    lines += ["", f"Tokenizing the Japanese chunks ({results['ja']['chunk_chars']:,} characters, best of 3 passes): " + "; ".join(
        f"{name} {speed['chars_per_s']:,} characters/s" for name, speed in ja.items()
    ) + "." + "".join(f" {note}." for note in tokenizer_notes)]  # fmt: skip
    lines += ["", "Example queries: " + "; ".join(
        f"{language}: {', '.join(data['examples'])}" for language, data in results.items()
    )]  # fmt: skip
    if args.save:
        save(
            "multilingual_known_item",
            results,
            "\n".join(lines),
            "python benchmarks/multilingual_known_item.py --save",
        )
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
