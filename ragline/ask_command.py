"""``ragline ask``: search, an answer streamed from the local model, its sources and
the check of every citation."""

from __future__ import annotations

import sys
import time

from rich.markup import escape

from rag_serving.answers import (
    Answer,
    NothingToAnswerFrom,
    answer_question,
    context_budget,
    excerpts_from_hits,
    unit_vectors,
)
from rag_serving.config import RaglineConfig
from rag_serving.llm import ChatModel
from rag_serving.search import SearchEngine, SearchFilters
from ragline.output import console, print_json, safe_text


def run_ask(
    config: RaglineConfig,
    question: str,
    k: int,
    filters: SearchFilters,
    model: str | None,
    context_chars: int | None,
    as_json: bool,
) -> None:
    """Answer ``question`` from the index; print the answer, its sources and the check."""
    llm = config.llm.model_copy(update={"model": model}) if model else config.llm
    chat = ChatModel(llm)
    _ = chat.model  # no model configured: say how to set one up before searching
    engine = SearchEngine(config)
    started = time.perf_counter()
    budget = context_chars or context_budget(llm.context_tokens)
    result = engine.search(question, k=k, filters=filters, context=budget)
    timings = {
        "retrieval": (time.perf_counter() - started) * 1000 - result.timings.get("context", 0.0),
        "context": result.timings.get("context", 0.0),
    }
    excerpts = excerpts_from_hits(result.hits)
    if not excerpts:
        raise NothingToAnswerFrom(
            f"nothing in the index matches {question!r}; no answer (try other words, "
            "fewer filters, or `ragline status` to see what is indexed)"
        )

    def stream(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    answer = answer_question(
        question,
        excerpts,
        chat,
        unit_vectors(engine.embedder),
        None if as_json else stream,
        timings,
    )
    if as_json:
        print_json(answer.as_json())
    else:
        sys.stdout.write("\n")
        render_sources_and_check(answer)


def render_sources_and_check(answer: Answer) -> None:
    """The cited excerpts, then each sentence the check did not find supported."""
    cited = answer.check.cited
    shown = [e for e in answer.excerpts if e.number in cited]
    if shown:
        console.print("\n[bold]Sources[/]")
        for e in shown:
            section = f" › {safe_text(e.section)}" if e.section else ""
            console.print(
                f"  [bold cyan][{e.number}][/] {safe_text(e.title)}{section}  "
                f"[dim]{safe_text(e.label())}[/]"
            )
    check = answer.check
    supported, unsupported, uncited = (
        check.count("supported"), check.count("unsupported"), check.count("uncited")
    )  # fmt: skip
    colour = "green" if unsupported == uncited == 0 else "yellow"
    console.print(
        f"\n[{colour}]Citations checked:[/] {supported} supported, {unsupported} "
        f"unsupported, {uncited} without a citation"
    )
    for sentence in check.sentences:
        if sentence.verdict in ("unsupported", "uncited"):
            mark = "unsupported" if sentence.verdict == "unsupported" else "no citation"
            cites = "".join(f"[{n}]" for n in sentence.cites)
            why = f" — {escape(sentence.reason)}" if sentence.reason else ""
            console.print(
                f"  [yellow]✗ {mark}[/] {cites} {safe_text(_short(sentence.text))}[dim]{why}[/]"
            )


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
