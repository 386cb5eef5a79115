"""Tags proposed by the ``[llm]`` model for a clip or a new document: it is given the
tags the index already holds and asked to prefer them, and its answer is validated
JSON (at most ``MAX_SUGGESTED`` tags kept, each as the Markdown parser keeps tags)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from rag_serving.config import RaglineConfig
from rag_serving.index.store import IndexStore
from rag_serving.llm.chat import ChatModel, LlmError
from rag_sources.errors import RaglineError
from rag_sources.naming import clean_tags

MAX_KNOWN_TAGS = 300  # the most used tags of the index given to the model
MAX_SUGGESTED = 5
TEXT_CHARS = 4000  # of the item's text shown to the model


class TagSuggestion(BaseModel):
    """The model's answer."""

    tags: list[str] = Field(default_factory=list, max_length=20)


@dataclass(frozen=True)
class AutoTags:
    tags: list[str]
    note: str  # one line: what was done, or why tagging was skipped


@dataclass(frozen=True)
class TagSubject:
    """What the model is shown of the item to tag."""

    title: str
    text: str  # the start of its text; empty when only its title is known (a PDF clip)
    details: Sequence[str] = ()  # lines such as "Author: …", "URL: …"


def known_tags(store: IndexStore, visible: Callable[[str], bool] | None = None) -> list[str]:
    """The index's tags, most used first (at most ``MAX_KNOWN_TAGS``), of the sources
    ``visible`` accepts (all by default); none when nothing is indexed yet."""
    if not store.table_exists("documents"):
        return []
    rows = store.read("documents", columns=["source", "tags"]).to_pylist()
    counts: Counter[str] = Counter()
    for row in rows:
        if visible is None or visible(row["source"]):
            counts.update(row["tags"] or [])
    return [tag for tag, _ in counts.most_common(MAX_KNOWN_TAGS)]


def propose_tags(chat: ChatModel, subject: TagSubject, known: Sequence[str]) -> list[str]:
    """Up to ``MAX_SUGGESTED`` usable tags from the model, the known ones first (an
    unusable tag it proposes is dropped); raises ``LlmError``."""
    listed = ", ".join(known) if known else "(none yet)"
    text = subject.text[:TEXT_CHARS] if subject.text else "(only its title is known)"
    details = "".join(f"{line}\n" for line in subject.details)
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
            "content": f"Existing tags: {listed}\n\nTitle: {subject.title}\n{details}\n{text}",
        },
    ]
    answer = chat.structured(messages, TagSuggestion)
    tags: list[str] = []
    for raw in answer.tags:
        try:
            tags += [t for t in clean_tags([raw]) if t not in tags]
        except RaglineError:
            continue  # an unusable tag from the model is dropped, not an error
    known_set = set(known)
    # Existing tags first: the model was asked to prefer them.
    return sorted(tags, key=lambda t: t not in known_set)[:MAX_SUGGESTED]


def suggest_tags(
    config: RaglineConfig,
    subject: TagSubject,
    known: Iterable[str],
    model: ChatModel | None = None,
) -> AutoTags:
    """``propose_tags``, never raising: for a model that is missing, down or answering
    badly the note says tagging was skipped, and why."""
    chat = model or ChatModel(config.llm)
    try:
        tags = propose_tags(chat, subject, list(known))
    except LlmError as exc:
        return AutoTags([], f"auto-tags skipped: {exc}")
    if not tags:
        return AutoTags([], f"auto-tags: the model {chat.model!r} proposed no usable tag")
    return AutoTags(tags, f"auto-tags from {chat.model!r}: {', '.join(tags)}")
