"""The MCP `remember` tool: the agent saves a note into the user's notes inbox.

The note goes to ``[remember] folder`` of ``[remember] source`` (see
``rag_serving.notes_inbox``), with links to the hits it came from, and is indexed at
once so that `search` finds it. Only a caller that may write (a token with
``write = true``; stdio with ``[mcp] stdio_write = true``) may save, and only into a
source it can see; links resolve only to what it can see.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Any

from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from rag_serving.config import RaglineConfig
from rag_serving.mcp.arguments import number
from rag_serving.mcp.auth import Access, write_refusal
from rag_serving.mcp.documents import Located, NotFoundError
from rag_serving.mcp.models import DocRef
from rag_serving.mcp.search import obsidian_anchor
from rag_serving.mcp.service import RaglineService
from rag_serving.mcp.tool_errors import redact_paths
from rag_serving.notes_inbox import (
    MAX_BODY_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    InboxError,
    SavedNote,
    check_body,
    check_tags,
    check_title,
    holds_notes,
    note_text,
    open_inbox,
    save_note,
)
from rag_serving.search.engine import hit_location
from rag_serving.watchers import live_watcher, wait_searchable
from rag_sources.errors import RaglineError

MAX_LINKS = 50
DEFAULT_WAIT_S = 30.0
MAX_WAIT_S = 120.0
ORIGIN = "mcp remember"
_NOTE_SUFFIXES = (".md", ".markdown")

REMEMBER = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)

REMEMBER_DESCRIPTION = f"""Save a note for the user: a Markdown file in their notes inbox
(the server's [remember] source and folder) that they can read and edit like any other
note, and that `search` finds once it is indexed.

Use it when the user asks you to remember, note or keep something, or to save a
finding worth keeping (a decision and why, a summary of what you read, an answer you
had to piece together). Put what matters in `body` (Markdown), in your own words; give
the `doc_id`s or `chunk_id`s of the hits it came from in `links`: each is written as a
link the user can follow ([[note#Heading]] for a note of the same vault, else
'source:path#page=6'). Never overwrites: a title already taken gets a new file name.
The note is indexed at once (waiting up to `wait_seconds`); the answer says whether it
is searchable yet. Needs write permission: without it the call fails and nothing is
saved. Limits: title {MAX_TITLE_CHARS} characters, body {MAX_BODY_CHARS:,}, {MAX_TAGS}
tags, {MAX_LINKS} links."""


class RememberOutput(BaseModel):
    """Where the note was saved, and whether `search` finds it yet."""

    source: str = Field(description="The source the note was saved in.")
    path: str = Field(description="The note's path relative to the source's root.")
    wiki_link: str = Field(description="A link to the note, e.g. '[[inbox/my-note]]'.")
    links: list[str] = Field(description="The links to the hits, as written in the note.")
    searchable: bool = Field(description="True when the note is in the index now.")
    note: DocRef | None = Field(description="The indexed note, when searchable.")
    indexing: str = Field(description="One line: how the note was indexed, or why not yet.")


def offered(config: RaglineConfig) -> bool:
    """The tool is listed when an inbox is set, or some caller may write (then a call
    says what is missing)."""
    return (
        config.remember.source is not None
        or config.mcp.stdio_write
        or any(token.write for token in config.mcp.tokens)
    )


def register(server: Any, service: RaglineService, call: Any) -> None:
    """Add the `remember` tool to ``server`` when the configuration offers it."""
    if not offered(service.config):
        return

    def save_note_for(access: Access, **arguments: Any) -> RememberOutput:
        return save(service, access, **arguments)

    async def remember(
        title: Annotated[
            str,
            Field(description=f"A short title (one line, up to {MAX_TITLE_CHARS} characters)."),
        ],
        body: Annotated[str, Field(description="The note, in Markdown.")] = "",
        tags: Annotated[
            list[str] | None,
            Field(description="Tags, e.g. 'project/ragline' ('#' optional; '/' nests)."),
        ] = None,
        links: Annotated[
            list[str] | None,
            Field(description="doc_ids or chunk_ids (from `search`) the note came from."),
        ] = None,
        wait_seconds: Annotated[
            number(0, MAX_WAIT_S),
            Field(
                description=f"Seconds to wait for the note to be indexed (default "
                f"{DEFAULT_WAIT_S:.0f}; 0: do not wait).",
            ),
        ] = DEFAULT_WAIT_S,
    ) -> RememberOutput:
        return await call(
            save_note_for,
            title=title,
            body=body,
            tags=list(tags or ()),
            links=list(links or ()),
            wait_s=wait_seconds,
        )

    server.add_tool(
        remember,
        name="remember",
        title="Save a note",
        description=REMEMBER_DESCRIPTION,
        annotations=REMEMBER,
    )


def save(
    service: RaglineService,
    access: Access,
    *,
    title: str,
    body: str,
    tags: list[str],
    links: list[str],
    wait_s: float,
) -> RememberOutput:
    """Check, write and index one note for ``access``."""
    config = service.config
    check_may_write(access)
    source = inbox_source(config, access)
    title, body, tags = check_title(title), check_body(body), check_tags(tags)
    if len(links) > MAX_LINKS:
        raise InboxError(f"{len(links)} links given; the limit is {MAX_LINKS}")
    found = [resolve_link(service, access, key) for key in dict.fromkeys(links)]
    written = [link_text(f, source.name) for f in found]
    inbox = open_inbox(source, config.remember.folder)
    text = note_text(
        title,
        body,
        tags=tags,
        links=[link for link, _ in written],
        link_lines=[line for _, line in written],
        created=datetime.now().astimezone(),
        user=access.user,
        origin=ORIGIN,
    )
    saved = save_note(inbox, title, text)
    indexing = shown(config, access, index_now(service, saved, wait_s))
    note = indexed(service, access, saved)
    if note is None:
        indexing += "; not searchable yet: `ragline watch` or the next indexing run adds it"
    return RememberOutput(
        source=saved.source,
        path=saved.path,
        wiki_link=saved.wiki_link,
        links=[link for link, _ in written],
        searchable=note is not None,
        note=note,
        indexing=indexing,
    )


def check_may_write(access: Access) -> None:
    """Refuse a caller without write permission, naming the setting that grants it."""
    refusal = write_refusal(access, "save notes")
    if refusal is not None:
        raise InboxError(refusal)


def inbox_source(config: RaglineConfig, access: Access) -> Any:
    """The configured notes source of the inbox, if this caller may write to it."""
    name = config.remember.source
    if name is None:
        raise InboxError(
            "no notes inbox is configured: set `source` (a markdown source) and optionally "
            "`folder` under [remember] in the server's config"
        )
    if not access.can_see(name):
        # Its name is not this caller's to learn.
        raise InboxError("this client may not save notes: its token cannot see the notes inbox")
    source = next((s for s in config.sources if s.name == name), None)
    if source is None:
        raise InboxError(
            f"[remember] source {name!r} is not a configured source; name one of the "
            "[[sources]] (a markdown source)"
        )
    if not holds_notes(source):
        raise InboxError(
            f"[remember] source {name!r} does not hold Markdown notes; name a markdown source"
        )
    return source


def resolve_link(service: RaglineService, access: Access, key: str) -> Located:
    """The document (and chunk) of a doc_id or chunk_id this caller may see."""
    try:
        return service.locate(access, id=key)
    except NotFoundError:
        # The same words for an id of a source it cannot see as for no such id.
        raise InboxError(
            f"link {key!r} is no doc_id or chunk_id you can see; use ids from `search` "
            "(nothing was saved)"
        ) from None


def link_text(found: Located, inbox_source_name: str) -> tuple[str, str]:
    """(the link, the note's line for it): a wiki link within the vault, else
    'source:path#anchor'."""
    doc, chunk = found.doc, found.chunk
    heading = (chunk or {}).get("heading") or ""
    anchor = (chunk or {}).get("anchor") or None
    path, title = doc["path"], doc["title"] or doc["path"]
    if doc["source"] == inbox_source_name:
        if path.lower().endswith(_NOTE_SUFFIXES):
            link = obsidian_anchor(path, heading)
        else:
            link = f"[[{hit_location(path, anchor)}]]"
        return link, link
    link = f"{doc['source']}:{hit_location(path, anchor)}"
    return link, f"{link} — {title}"


def index_now(service: RaglineService, saved: SavedNote, wait_s: float) -> str:
    """Wait for the run of a `ragline watch` watching the source, else run the source's
    indexing (as `reindex` does); say, on one line, how it went."""
    if live_watcher(service.config, saved.source) is not None:
        started = time.perf_counter()
        if wait_searchable(service.config, saved.source, [saved.path], wait_s):
            seconds = time.perf_counter() - started
            return f"indexed {saved.source} (by the running `ragline watch`) in {seconds:.1f}s"
        return (
            f"the running `ragline watch` indexes {saved.source}; not searchable after "
            f"{wait_s:.0f}s yet"
        )
    try:
        outcome = service.reindexer.run(saved.source, full=False, wait_s=wait_s)
    except RaglineError as exc:
        return f"not indexed now: {exc}"
    if outcome.success is None:
        return (
            f"indexing {saved.source} ({outcome.via}) still runs after {outcome.seconds:.0f}s; "
            "the note is searchable when it ends"
        )
    if not outcome.success:
        return f"not indexed now: the run failed: {outcome.error or outcome.status.lower()}"
    return f"indexed {saved.source} ({outcome.via}) in {outcome.seconds:.1f}s"


def shown(config: RaglineConfig, access: Access, text: str) -> str:
    """``text`` as ``access`` may read it: server paths only for the local user."""
    if access.local:
        return text
    return redact_paths(text, [s.path for s in config.sources if s.path] + [config.data_dir])


def indexed(service: RaglineService, access: Access, saved: SavedNote) -> DocRef | None:
    try:
        doc = service.locate(access, source=saved.source, path=saved.path).doc
    except RaglineError:
        return None
    return DocRef(doc_id=doc["doc_id"], source=doc["source"], path=doc["path"], title=doc["title"])
