"""After retrieval: answers from the local model with checked citations."""

from rag_serving.answers.ask import (
    Answer,
    Excerpt,
    NothingToAnswerFrom,
    answer_question,
    context_budget,
    excerpts_from_hits,
    unit_vectors,
)
from rag_serving.answers.citations import CitationCheck, check_citations

__all__ = [
    "Answer",
    "CitationCheck",
    "Excerpt",
    "NothingToAnswerFrom",
    "answer_question",
    "check_citations",
    "context_budget",
    "excerpts_from_hits",
    "unit_vectors",
]
