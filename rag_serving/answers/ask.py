"""`ragline ask`: an answer from the local model, from numbered excerpts of the index,
with every citation checked against the excerpt it cites.

Retrieval is the hybrid search with the hits grown to their sections within a budget
that fits the model's context (``[llm] context_tokens``); excerpts are numbered in
rank order, and the model is told to cite them as ``[n]``. The answer streams as the
model writes it; then each sentence is checked (``citations.check_citations``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rag_serving.answers.citations import CitationCheck, Passage, check_citations
from rag_serving.llm import ChatModel
from rag_sources.errors import RaglineError

# Characters per token for the budget (English prose with a BERT-like tokenizer ~4;
# code and non-Latin text fewer): three keeps the prompt inside the window.
CHARS_PER_TOKEN = 3
# Tokens kept free for the instructions, the question and the answer.
ANSWER_TOKENS = 1500
MAX_QUESTION_CHARS = 2000

SYSTEM_PROMPT = """You answer questions from the user's own notes and documents.
Use only the numbered excerpts below; do not use outside knowledge.
After every sentence that states a fact, cite the excerpt(s) it comes from as [n],
e.g. "Backups run nightly [2]." Cite only excerpts that say what the sentence says.
If the excerpts do not contain the answer, say so in one sentence and cite nothing.
Answer in the language of the question, briefly."""


class NothingToAnswerFrom(RaglineError):
    """No indexed passage (that the caller may see) matches the question."""


def unit_vectors(embedder: Any) -> Callable[[list[str]], np.ndarray]:
    """Unit vectors of texts for the citation check, from the embedder's query encoder:
    the search has just loaded it, and a few short texts cost less there than loading
    the document encoder."""

    def embed(texts: list[str]) -> np.ndarray:
        vectors = np.stack([np.asarray(embedder.embed_query(t), dtype=np.float32) for t in texts])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    return embed


@dataclass
class Excerpt:
    """One numbered excerpt given to the model, and where it is in the index."""

    number: int
    chunk_id: str
    doc_id: str
    source: str
    path: str
    title: str
    location: str
    section: str | None
    line_start: int
    line_end: int
    text: str

    def label(self) -> str:
        """Where the excerpt is, as the prompt and the sources list name it."""
        where = self.location or self.path
        lines = f", lines {self.line_start}-{self.line_end}"
        return f"{self.source}:{where}{lines}"

    def as_json(self, cited: bool) -> dict[str, Any]:
        return {
            "n": self.number,
            "cited": cited,
            "source": self.source,
            "path": self.path,
            "title": self.title,
            "location": self.location,
            "section": self.section,
            "lines": [self.line_start, self.line_end],
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
        }


@dataclass
class Answer:
    question: str
    model: str
    text: str
    excerpts: list[Excerpt]
    check: CitationCheck
    timings_ms: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        cited = self.check.cited
        return {
            "question": self.question,
            "model": self.model,
            "answer": self.text,
            "citations": [e.as_json(e.number in cited) for e in self.excerpts],
            "sentences": [s.as_json() for s in self.check.sentences],
            "verdict": self.check.as_json(),
            "timings_ms": {k: round(v, 1) for k, v in self.timings_ms.items()},
        }


def context_budget(context_tokens: int) -> int:
    """Characters of excerpts that fit the model's window with room for the answer."""
    return max(context_tokens - ANSWER_TOKENS, 256) * CHARS_PER_TOKEN


def excerpts_from_hits(hits: Sequence[Any]) -> list[Excerpt]:
    """Numbered excerpts from search hits with contexts (``SearchHit`` or the MCP
    ``Hit``): a hit inside a better hit's context adds nothing; one without a context
    (past the budget) is left out."""
    excerpts: list[Excerpt] = []
    for hit in hits:
        context = hit.context
        if context is None or context.same_as is not None or not context.text.strip():
            continue
        excerpts.append(
            Excerpt(
                number=len(excerpts) + 1,
                chunk_id=hit.chunk_id,
                doc_id=hit.doc_id,
                source=hit.source,
                path=hit.path,
                title=hit.title,
                location=hit.location,
                section=context.section,
                line_start=context.line_start,
                line_end=context.line_end,
                text=context.text,
            )
        )
    return excerpts


def prompt_messages(question: str, excerpts: Sequence[Excerpt]) -> list[dict[str, str]]:
    """The chat messages: the rules, then the numbered excerpts and the question."""
    blocks = [
        f"[{e.number}] {e.title} ({e.label()})" + (f" — {e.section}" if e.section else "")
        + f"\n{e.text}"
        for e in excerpts
    ]  # fmt: skip
    user = "Excerpts:\n\n" + "\n\n".join(blocks) + f"\n\nQuestion: {question}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def answer_question(
    question: str,
    excerpts: list[Excerpt],
    chat: ChatModel,
    embed: Callable[[list[str]], Any] | None,
    on_text: Callable[[str], None] | None = None,
    timings_ms: dict[str, float] | None = None,
) -> Answer:
    """Ask the model about ``excerpts`` (streaming its text to ``on_text``), then check
    every citation."""
    timings = dict(timings_ms or {})
    started = time.perf_counter()
    pieces: list[str] = []
    for piece in chat.stream(prompt_messages(question, excerpts)):
        pieces.append(piece)
        if on_text is not None:
            on_text(piece)
    timings["model"] = (time.perf_counter() - started) * 1000
    text = "".join(pieces).strip()
    started = time.perf_counter()
    passages = {e.number: Passage(e.number, e.text, e.line_start) for e in excerpts}
    check = check_citations(text, passages, embed)
    timings["check"] = (time.perf_counter() - started) * 1000
    return Answer(question, chat.model, text, excerpts, check, timings)
