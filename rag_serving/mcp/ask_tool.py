"""The MCP ``ask`` tool: ragline's own answer from the local model, with its citations
checked — for clients that want an answer rather than hits. Offered only with
``[mcp] ask_tool = true`` (it needs ``[llm]``, and an answer takes seconds)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from rag_serving.mcp.arguments import whole
from rag_serving.mcp.search import SearchRequest

if TYPE_CHECKING:
    from rag_serving.mcp.auth import Access
    from rag_serving.mcp.service import RaglineService

ASK_DESCRIPTION = """Answer a question from the user's indexed notes and documents with
the local language model: it searches (as `search` does), gives the model the best
excerpts, and returns its answer with numbered citations, each citation mapped to a
source, path and location, and each cited sentence checked against the excerpt it
cites (`verdict` per sentence: supported, unsupported, uncited). Slower than
`search` (seconds); prefer `search` with `expand` when you can read passages
yourself. Filters as in `search`."""


class AskCitation(BaseModel):
    n: int
    cited: bool = Field(description="Whether the answer cites it.")
    source: str
    path: str
    title: str
    location: str
    section: str | None
    line_start: int
    line_end: int
    chunk_id: str
    doc_id: str


class AskSentence(BaseModel):
    text: str
    cites: list[int]
    verdict: str = Field(description="supported, unsupported, uncited or 'no claim'.")
    reason: str | None = None


class AskOutput(BaseModel):
    question: str
    model: str
    answer: str
    citations: list[AskCitation]
    sentences: list[AskSentence]
    all_supported: bool = Field(
        description="True when every sentence that states something cites an excerpt that holds it."
    )


def ask(
    service: RaglineService,
    access: Access,
    *,
    question: str,
    k: int,
    sources: list[str] | None,
    kinds: list[str] | None,
    tags: list[str] | None,
    path_prefix: str | None,
    after: str | None,
    before: str | None,
) -> AskOutput:
    """Search as ``access`` may, then answer from the hits' contexts."""
    # Here, not at the top: the tool is off by default, and a server that does not
    # offer it need not load the answering code at start-up.
    from rag_serving.answers import (
        NothingToAnswerFrom,
        answer_question,
        context_budget,
        excerpts_from_hits,
        unit_vectors,
    )
    from rag_serving.llm import ChatModel

    chat = ChatModel(service.config.llm)
    _ = chat.model  # no model: say how to set one up before searching
    request = SearchRequest(
        query=question,
        k=k,
        expand=context_budget(service.config.llm.context_tokens),
        sources=tuple(sources or ()),
        kinds=tuple(kinds or ()),
        tags=tuple(tags or ()),
        path_prefix=path_prefix,
        after=after,
        before=before,
    )
    found = service.search(access, request)
    excerpts = excerpts_from_hits(found.hits)
    if not excerpts:
        raise NothingToAnswerFrom(f"nothing you can search matches {question!r}; no answer")
    answer = answer_question(question, excerpts, chat, unit_vectors(service.engine.embedder))
    cited = answer.check.cited
    return AskOutput(
        question=question,
        model=answer.model,
        answer=answer.text,
        citations=[
            AskCitation(
                n=e.number,
                cited=e.number in cited,
                source=e.source,
                path=e.path,
                title=e.title,
                location=e.location,
                section=e.section,
                line_start=e.line_start,
                line_end=e.line_end,
                chunk_id=e.chunk_id,
                doc_id=e.doc_id,
            )
            for e in answer.excerpts
        ],
        sentences=[
            AskSentence(text=s.text, cites=s.cites, verdict=s.verdict, reason=s.reason)
            for s in answer.check.sentences
        ],
        all_supported=answer.check.as_json()["all_supported"],
    )


def register(server: Any, service: RaglineService, call: Any) -> None:
    """Add the ``ask`` tool to ``server`` when ``[mcp] ask_tool`` is on."""
    if not service.config.mcp.ask_tool:
        return

    async def ask_tool(
        question: Annotated[str, Field(description="The question, in natural language.")],
        k: Annotated[whole(1, 50), Field(description="Hits to answer from.")] = 8,
        sources: Annotated[list[str] | None, Field(description="Only these sources.")] = None,
        kinds: Annotated[list[str] | None, Field(description="Only these kinds.")] = None,
        tags: Annotated[
            list[str] | None, Field(description="Only items with all these tags.")
        ] = None,
        path_prefix: Annotated[
            str | None, Field(description="Only paths starting with this.")
        ] = None,
        after: Annotated[
            str | None, Field(description="Only items dated on or after this (YYYY-MM-DD).")
        ] = None,
        before: Annotated[
            str | None, Field(description="Only items dated before this (YYYY-MM-DD).")
        ] = None,
    ) -> AskOutput:
        return await call(
            _bound,
            question=question,
            k=k,
            sources=sources,
            kinds=kinds,
            tags=tags,
            path_prefix=path_prefix,
            after=after,
            before=before,
        )

    def _bound(access: Access, **kwargs: Any) -> AskOutput:
        return ask(service, access, **kwargs)

    server.add_tool(
        ask_tool,
        name="ask",
        title="Ask the notes",
        description=ASK_DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, open_world_hint=False
        ),
    )
