"""Tags for a clip proposed by the ``[llm]`` model, which is given the tags the index
already holds and asked to prefer them; its answer is validated JSON."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from rag_serving.config import RaglineConfig
from rag_serving.llm import ChatModel, LlmError
from rag_sources.clipping.extract import Extracted
from rag_sources.errors import RaglineError
from rag_sources.naming import clean_tags

if TYPE_CHECKING:
    from rag_serving.search import SearchEngine

MAX_KNOWN_TAGS = 300  # the most used tags of the index given to the model
MAX_SUGGESTED = 5
TEXT_CHARS = 4000  # of the clip's text shown to the model


class TagSuggestion(BaseModel):
    """The model's answer."""

    tags: list[str] = Field(default_factory=list, max_length=20)


@dataclass(frozen=True)
class AutoTags:
    tags: list[str]
    note: str  # one line: what was done, or why tagging was skipped


def known_tags(engine: SearchEngine, visible: Callable[[str], bool] | None = None) -> list[str]:
    """The index's tags, most used first (at most ``MAX_KNOWN_TAGS``), of the sources
    ``visible`` accepts (all by default); none when nothing is indexed yet."""
    store = engine.store
    if not store.table_exists("documents"):
        return []
    rows = store.read("documents", columns=["source", "tags"]).to_pylist()
    counts: Counter[str] = Counter()
    for row in rows:
        if visible is None or visible(row["source"]):
            counts.update(row["tags"] or [])
    return [tag for tag, _ in counts.most_common(MAX_KNOWN_TAGS)]


def suggest_tags(
    config: RaglineConfig, clip: Extracted, known: Iterable[str], model: ChatModel | None = None
) -> AutoTags:
    """Up to ``MAX_SUGGESTED`` tags from the model; never raises for a model that is
    missing, down or answering badly (the note says tagging was skipped, and why)."""
    chat = model or ChatModel(config.llm)
    known = list(known)
    listed = ", ".join(known) if known else "(none yet)"
    text = clip.body[:TEXT_CHARS] if clip.body else "(a PDF; only its title is known)"
    messages = [
        {
            "role": "system",
            "content": (
                "You tag documents in a personal knowledge base. Answer with JSON "
                '{"tags": [...]}: 1 to 5 short lower-case tags (words joined by "-", "/" '
                "for nested tags). Prefer tags from the list of existing tags whenever "
                "one fits; add a new tag only when none of them does."
            ),
        },
        {
            "role": "user",
            "content": (
                f"Existing tags: {listed}\n\nTitle: {clip.title}\n"
                f"Author: {clip.author or 'unknown'}\nURL: {clip.canonical_url}\n\n{text}"
            ),
        },
    ]
    try:
        answer = chat.structured(messages, TagSuggestion)
    except LlmError as exc:
        return AutoTags([], f"auto-tags skipped: {exc}")
    tags: list[str] = []
    for raw in answer.tags:
        try:
            tags += [t for t in clean_tags([raw]) if t not in tags]
        except RaglineError:
            continue  # an unusable tag from the model is dropped, not an error
    known_set = set(known)
    # Existing tags first: the model was asked to prefer them.
    tags = sorted(tags, key=lambda t: t not in known_set)[:MAX_SUGGESTED]
    if not tags:
        return AutoTags([], f"auto-tags: the model {chat.model!r} proposed no usable tag")
    return AutoTags(tags, f"auto-tags from {chat.model!r}: {', '.join(tags)}")
