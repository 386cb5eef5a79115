"""Checking an answer's citations against what they cite.

Each sentence of the answer that cites excerpts (``[2]``, ``[1, 3]``) is compared
with the passages of those excerpts: lexically (the share of its content words the
passage holds) and by meaning (the cosine between the embedder's vectors of the
sentence and of the passage's best window). A sentence is *supported* when one cited
excerpt holds it by either measure, *unsupported* otherwise — or when it cites an
excerpt that was never given — and a sentence that states something without any
citation is *uncited*. Nothing is passed silently: every sentence gets a verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Citation markers: [1], [1, 3], [1][2].
_MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
# Sentence ends: . ! ? or CJK 。！？ followed by space, or a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)|(?<=[。！？])|\n+")
_SPACE_BEFORE_MARK = re.compile(r"\s+([.,;:!?])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
# Words that carry no claim (English; other languages count every word).
_STOP = frozenset(
    [
        "too",
        "just",
        "very",
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "may",
        "might",
        "more",
        "most",
        "not",
        "of",
        "on",
        "or",
        "our",
        "should",
        "so",
        "such",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
        "also",
        "only",
        "other",
        "any",
        "all",
        "each",
        "both",
        "one",
        "two",
        "per",
        "via",
        "about",
        "over",
        "under",
        "between",
    ]
)
# A supported sentence: most of its words are in the passage, or its meaning is close
# and a fair share of its words are there too.
LEXICAL_SUPPORT = 0.6
SEMANTIC_SUPPORT = 0.72
SEMANTIC_MIN_LEXICAL = 0.25
# Sentences with fewer content words than this state nothing to check ("In short:").
MIN_CLAIM_WORDS = 3
# Windows per claim compared by meaning: those sharing most words with it.
EMBEDDED_SPANS = 8
# Passage windows: a few lines of an excerpt, overlapping.
WINDOW_LINES = 3


@dataclass
class Passage:
    """A cited excerpt as the checker reads it: its text and the file line of its start."""

    number: int
    text: str
    line_start: int


@dataclass
class Span:
    """The part of a cited excerpt that best matches a sentence."""

    number: int
    line_start: int
    line_end: int
    text: str


@dataclass
class CheckedSentence:
    text: str
    cites: list[int]
    verdict: str  # supported | unsupported | uncited | no claim
    lexical: float = 0.0
    semantic: float = 0.0
    span: Span | None = None
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "text": self.text,
            "cites": self.cites,
            "verdict": self.verdict,
            "lexical": round(self.lexical, 3),
            "semantic": round(self.semantic, 3),
        }
        if self.span is not None:
            data["span"] = {
                "excerpt": self.span.number,
                "lines": [self.span.line_start, self.span.line_end],
                "text": self.span.text,
            }
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass
class CitationCheck:
    sentences: list[CheckedSentence] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(1 for s in self.sentences if s.verdict == verdict)

    @property
    def cited(self) -> set[int]:
        return {n for s in self.sentences for n in s.cites}

    def as_json(self) -> dict[str, Any]:
        return {
            "supported": self.count("supported"),
            "unsupported": self.count("unsupported"),
            "uncited": self.count("uncited"),
            "all_supported": self.count("unsupported") == 0 and self.count("uncited") == 0,
        }


def split_sentences(answer: str) -> list[tuple[str, list[int]]]:
    """The answer's sentences, each without its markers, with the excerpts it cites.
    A marker standing alone after a sentence's end (``… done. [2]``) belongs to it."""
    pieces = [p.strip() for p in _SENTENCE_END.split(answer) if p and p.strip()]
    out: list[tuple[str, list[int]]] = []
    for piece in pieces:
        cites = [int(n) for group in _MARKER.findall(piece) for n in group.split(",")]
        text = _SPACE_BEFORE_MARK.sub(r"\1", " ".join(_MARKER.sub(" ", piece).split()))
        if not _WORD.search(text) and out:  # only markers: they cite the sentence before
            out[-1][1].extend(n for n in cites if n not in out[-1][1])
            continue
        out.append((text, list(dict.fromkeys(cites))))
    return out


def content_words(text: str) -> list[str]:
    """Words that carry a claim: lower-cased, stop words out; CJK text by character."""
    words: list[str] = []
    for word in _WORD.findall(text.casefold()):
        if _CJK.search(word):
            words.extend(ch for ch in word if _CJK.match(ch))
        elif word not in _STOP and (len(word) > 2 or word.isdigit()):
            words.append(word)
    return words


def _stem(word: str) -> str:
    """A crude stem: enough to match "indexes" with "indexed" and "index"."""
    return word[:6] if len(word) > 6 else word.rstrip("s")


def lexical_overlap(claim: Sequence[str], passage: str) -> float:
    """The share of the claim's words (by stem) found in ``passage``."""
    if not claim:
        return 0.0
    present = {_stem(w) for w in content_words(passage)}
    return sum(1 for w in claim if _stem(w) in present) / len(claim)


def _windows(passage: Passage) -> list[Span]:
    """The passage's lines, and runs of ``WINDOW_LINES`` of them (a claim may draw on
    one line or on a few)."""
    lines = passage.text.split("\n")
    spans = [
        Span(passage.number, passage.line_start + i, passage.line_start + i, line.strip())
        for i, line in enumerate(lines)
        if len(line.split()) >= MIN_CLAIM_WORDS
    ]
    step = max(WINDOW_LINES - 1, 1)
    for start in range(0, max(len(lines) - 1, 1), step):
        chunk = lines[start : start + WINDOW_LINES]
        text = "\n".join(chunk).strip()
        if text:
            first = passage.line_start + start
            spans.append(Span(passage.number, first, first + len(chunk) - 1, text))
    return spans or [Span(passage.number, passage.line_start, passage.line_start, passage.text)]


def _likeliest(words: Sequence[str], spans: list[Span]) -> list[Span]:
    """The ``EMBEDDED_SPANS`` windows sharing most words with the claim (embedding every
    window of a long excerpt cost more than the search)."""
    ranked = sorted(spans, key=lambda span: -lexical_overlap(words, span.text))
    return ranked[:EMBEDDED_SPANS]


def check_citations(
    answer: str,
    passages: dict[int, Passage],
    embed: Callable[[list[str]], np.ndarray] | None,
) -> CitationCheck:
    """Every sentence of ``answer`` with its verdict against the passages it cites.
    ``embed`` gives unit vectors for texts (None: lexical overlap alone)."""
    check = CitationCheck()
    wanted: list[tuple[CheckedSentence, list[str], list[Span]]] = []
    for text, cites in split_sentences(answer):
        words = content_words(text)
        sentence = CheckedSentence(text, cites, "no claim")
        check.sentences.append(sentence)
        if not cites:
            if len(words) >= MIN_CLAIM_WORDS:
                sentence.verdict = "uncited"
            continue
        unknown = [n for n in cites if n not in passages]
        if unknown:
            sentence.verdict = "unsupported"
            sentence.reason = f"cites [{', '.join(map(str, unknown))}], which no excerpt is"
            continue
        spans = [span for n in cites for span in _windows(passages[n])]
        wanted.append((sentence, words, spans))
    # Meaning is compared only where the words alone do not show support: embedding
    # every window of every cited excerpt was most of ask's own time.
    unsure = [
        (s, _likeliest(words, spans))
        for s, words, spans in wanted
        if max(lexical_overlap(words, passages[n].text) for n in s.cites) < LEXICAL_SUPPORT
    ]
    vectors: dict[str, np.ndarray] = {}
    if embed is not None and unsure:
        texts = list(dict.fromkeys(
            [s.text for s, _ in unsure] + [span.text for _, spans in unsure for span in spans]
        ))  # fmt: skip
        vectors = dict(zip(texts, embed(texts), strict=True))
    for sentence, words, spans in wanted:
        best: tuple[float, float, Span] | None = None
        lexical_all = max(
            lexical_overlap(words, passages[n].text) for n in sentence.cites
        )  # the claim may draw on several lines of one excerpt
        for span in spans:
            lexical = lexical_overlap(words, span.text)
            semantic = (
                float(np.dot(vectors[sentence.text], vectors[span.text]))
                if sentence.text in vectors and span.text in vectors
                else 0.0
            )
            score = max(lexical, semantic)
            if best is None or score > max(best[0], best[1]):
                best = (lexical, semantic, span)
        assert best is not None
        sentence.lexical, sentence.semantic, sentence.span = max(lexical_all, best[0]), *best[1:]
        supported = sentence.lexical >= LEXICAL_SUPPORT or (
            sentence.semantic >= SEMANTIC_SUPPORT and sentence.lexical >= SEMANTIC_MIN_LEXICAL
        )
        if not words:
            supported = True  # nothing to check beyond the citation itself
        sentence.verdict = "supported" if supported else "unsupported"
        if not supported:
            sentence.reason = (
                f"the cited excerpt holds {sentence.lexical:.0%} of its words and its "
                f"meaning is {sentence.semantic:.2f} close"
            )
    return check
