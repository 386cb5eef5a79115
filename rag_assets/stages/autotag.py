"""Tags from the ``[llm]`` model for a source's new documents (``auto_tags = true``).

A document is new when the source had documents before the run and this one had
none: a source's first index (its backlog) is not tagged, since one model call per
item would hold a vault of thousands of notes back for hours; at most
``MAX_TAGGED_PER_RUN`` documents are tagged per run, the rest counted. The model is
given the index's tags to prefer (``rag_serving.llm.tags``).

Tags land in the index only (the ``tags`` column and filter), never in the user's
file: a background run writing into a note the user may be editing could lose their
edit. They are kept in ``model_tags`` and merged into the document's own tags each
time it is parsed, so an edit keeps them and the model is asked once per document.

The model being down never fails the source: the first "unavailable" answer stops
the asking for the rest of the run, and the run's metadata (``auto_tags``) says why.
A new document the model was not asked about (down, over the run's cap, an invalid
answer) is owed its tags: ``model_tags`` keeps it with no tags, and later runs parse
it again and ask, until it has them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from rag_serving.config import LlmConfig
from rag_serving.index import schema as schemas
from rag_serving.index.store import IndexStore
from rag_serving.llm import ChatModel, LlmError, LlmUnavailableError
from rag_serving.llm.tags import TagSubject, known_tags, propose_tags
from rag_sources.config import FileSourceConfig
from rag_sources.where import sql_in, sql_string

MAX_TAGGED_PER_RUN = 50
TABLE = "model_tags"


class DocumentTagger:
    """Merges kept model tags into parsed documents, and asks the model for the tags
    of new ones."""

    def __init__(
        self,
        store: IndexStore,
        source: FileSourceConfig,
        llm: LlmConfig,
        chat: ChatModel | None = None,
    ):
        self.store = store
        self.source = source.name
        self._scope = f"source = {sql_string(source.name)}"
        rows = store.read(TABLE, where=self._scope, columns=["doc_id", "tags"]).to_pylist()
        self.kept: dict[str, list[str]] = {
            r["doc_id"]: list(r["tags"]) for r in rows if r["tags"] is not None
        }
        # New documents not tagged yet (rows without tags): asked about again.
        self.owed: set[str] = {r["doc_id"] for r in rows if r["tags"] is None}
        first_index = store.count("documents", self._scope) == 0
        self.asking = source.auto_tags and not first_index
        self.backlog = source.auto_tags and first_index
        self._llm = llm
        self._chat = chat
        self._known: list[str] | None = None
        self._pending: list[dict[str, Any]] = []
        self.tagged = 0
        self.failed = 0
        self.left = 0  # new documents beyond the run's cap
        self.stopped: str | None = None  # why asking stopped (the model is unavailable)
        self.last_error: str | None = None

    @classmethod
    def for_source(
        cls, store: IndexStore, source: FileSourceConfig, llm: LlmConfig
    ) -> DocumentTagger | None:
        """A tagger when the source asks for tags or has kept ones; None otherwise."""
        if not source.auto_tags and not store.table_exists(TABLE):
            return None
        tagger = cls(store, source, llm)
        return tagger if tagger.kept or source.auto_tags else None

    def owes(self, doc_id: str) -> bool:
        """Whether the document is owed its tags and this run may ask for them."""
        return self.asking and doc_id in self.owed

    def apply(self, row: dict[str, Any], new: bool) -> None:
        """Add the document's model tags to ``row['tags']`` (asking for them when it
        is new, or owed them, and the source wants them)."""
        doc_id = row["doc_id"]
        tags = self.kept.get(doc_id)
        if tags is None and self.asking and (new or doc_id in self.owed):
            tags = self._ask(row)
            if tags is None and doc_id not in self.owed:
                self.owed.add(doc_id)
                self._pending.append(self._row(row, None))
        if tags:
            row["tags"] = list(dict.fromkeys([*(row["tags"] or []), *tags]))

    def _row(self, row: dict[str, Any], tags: list[str] | None) -> dict[str, Any]:
        model = self._chat.model if tags is not None and self._chat is not None else None
        return {
            "doc_id": row["doc_id"],
            "source": self.source,
            "path": row["path"],
            "tags": tags,
            "model": model,
            "tagged_at": datetime.now(UTC) if tags is not None else None,
        }

    def _ask(self, row: dict[str, Any]) -> list[str] | None:
        if self.stopped is not None:
            return None
        if self.tagged + self.failed >= MAX_TAGGED_PER_RUN:
            self.left += 1
            return None
        if self._chat is None:
            self._chat = ChatModel(self._llm)
        if self._known is None:
            self._known = known_tags(self.store)
        subject = TagSubject(
            row["title"] or row["path"], row["body"] or "", [f"Path: {row['path']}"]
        )
        try:
            tags = propose_tags(self._chat, subject, self._known)
        except LlmUnavailableError as exc:
            self.stopped = str(exc)
            return None
        except LlmError as exc:
            self.failed += 1
            self.last_error = str(exc)
            return None
        self.tagged += 1
        self.kept[row["doc_id"]] = tags
        self.owed.discard(row["doc_id"])
        # Later documents of the run may reuse what this one was given.
        self._known += [t for t in tags if t not in self._known]
        self._pending.append(self._row(row, tags))
        return tags

    def flush(self, gone: list[str] | None = None) -> None:
        """Write the tags asked for so far; forget those of ``gone`` documents."""
        forgotten = [d for d in gone or () if d in self.kept or d in self.owed]
        if not self._pending and not forgotten:
            return
        self.store.apply_changes(
            TABLE,
            schemas.MODEL_TAGS,
            pa.Table.from_pylist(self._pending, schemas.MODEL_TAGS) if self._pending else None,
            delete_where=f"{self._scope} AND {sql_in('doc_id', forgotten)}" if forgotten else None,
        )
        self._pending = []
        for doc_id in forgotten:
            self.kept.pop(doc_id, None)
            self.owed.discard(doc_id)

    def summary(self) -> str | None:
        """One line for the run's metadata: what was tagged, or why not."""
        parts = []
        if self.tagged:
            parts.append(f"{self.tagged} new document(s) tagged by the model")
        if self.backlog:
            parts.append("the source's first index is not tagged (only documents added later)")
        if self.left:
            parts.append(
                f"{self.left} more left for a later run (at most {MAX_TAGGED_PER_RUN} per run)"
            )
        if self.failed:
            parts.append(f"{self.failed} not tagged: {self.last_error}")
        if self.stopped is not None:
            parts.append(f"auto-tags skipped: {self.stopped}")
        if self.owed and (self.stopped is not None or self.failed or self.left):
            parts.append(f"{len(self.owed)} document(s) to tag when the model answers")
        return "; ".join(parts) or None
