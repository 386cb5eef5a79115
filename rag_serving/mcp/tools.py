"""The MCP tools: typed arguments, descriptions a model can act on, structured output.

Each tool resolves the caller's access first (in the request's own task), then runs
the index work in a worker thread. ragline's own errors reach the model as
``ToolError`` messages it can read and act on; anything else is logged with its
traceback and reaches the model as one line naming the exception.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from rag_serving.mcp import ask_tool, clip_tool, remember_tool
from rag_serving.mcp.arguments import Flag, number, whole
from rag_serving.mcp.auth import Access
from rag_serving.mcp.models import (
    ListSourcesOutput,
    NeighborsOutput,
    OpenOutput,
    ReindexOutput,
    SearchOutput,
    StatusOutput,
)
from rag_serving.mcp.search import SearchRequest
from rag_serving.mcp.service import DEFAULT_OPEN_CHARS, MAX_OPEN_CHARS, RaglineService
from rag_serving.mcp.tool_errors import crash_reason, one_line, redact_paths
from rag_serving.reading import MAX_CONTEXT_CHARS
from rag_sources.errors import RaglineError
from rag_sources.kinds import kind_filters

T = TypeVar("T")
log = logging.getLogger(__name__)
AccessResolver = Callable[[], Access]


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
REINDEX = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

SEARCH_DESCRIPTION = """Search the user's indexed notes and documents (hybrid BM25 +
semantic search over Markdown notes, PDFs, office files, web pages, e-books, git
repositories (code by function/class, and commits), mail (messages and their
attachments), feed entries and Calibre books).

Returns ranked chunks with what you need to cite them: source, path, `location`
(e.g. 'paper.pdf#page=6', 'deck.pptx#slide=3', 'src/app.py#L10-L42'), heading, line
range, chunk_id and doc_id, the item's date (`modified`), and a `stale` flag when the
file changed since it was indexed. Use `open` with a hit's chunk_id (or doc_id) to read
the page, slide, function or section it is on.

Filters (each list matches any of its values; all filters must hold):
`sources`, `kinds`; `types` (file types: pdf, md, docx, pptx, xlsx, html, epub, txt…;
a code file's type is its language: python, go…; commit, email, entry; aliases such
as 'markdown' or 'py' are accepted); `tags` (all must be present; a tag also matches
its nested tags); `path_prefix` (relative to the source root); `after`/`before`
(YYYY-MM-DD or ISO 8601) compare each item's own date, the `modified` of its hits: a
commit's date, a message's Date, a feed entry's published or updated date, a note's
date (its frontmatter `date`/`created`, or a date in its file name such as
'2024-01-15.md'), otherwise the file's modification time.
Code hits carry `symbol` (with a `symbols` filter: the symbol that matched, with its
class: 'UploadClient.upload') and `language`; `languages` (aliases such as 'py',
'golang', 'c++') and `symbols` (a function, method or class, short or qualified name)
narrow to code. Commit hits (file_type 'commit') carry `author`; their title is the
subject. `authors` (name or e-mail) matches the author of commits, books and feed
entries and of messages (their sender). Message hits (file_type 'email') carry
`author` (the sender) and `folder`, their title is the subject; `senders`,
`recipients` (To or Cc) and `folders` narrow to messages; a message's `neighbors` are
its thread and attachments. Feed entries (file_type 'entry') carry `feed` (filter:
`feeds`); books carry `author` (filters: `authors`, `series`, `tags`).
An unknown source, kind, type, tag, language, symbol, author, sender, recipient,
folder, series or feed is an error that lists close matches; call `list_sources` to
see the sources."""

OPEN_DESCRIPTION = """Read an indexed note or document, or part of it, with line numbers.

Name it by `id` (a doc_id or chunk_id from `search` or `neighbors`) or by
`source` + `path` (relative to the source root, as `search` returns it; '.md' may be
left out). A doc id returns the whole document. A chunk id returns the chunk in its
context: for a note, the chunk's lines; for a PDF, slide deck, spreadsheet or e-book,
the whole page, slide, sheet or chapter it is on; for code, its whole function,
method or class — and the chunk's own lines when that context is longer than
`max_lines`/`max_chars`, so the answer always holds the chunk. Narrow with either
`start_line`/`end_line` (inclusive) or `section` (a heading or heading path like
'Install > Linux' or 'Install#Linux', or a part's anchor like 'page=6', 'slide=3',
'sheet=Sales', 'chapter=2'), not both. Only indexed items can be opened; for a file
that failed to index or was skipped, the error says why (as `status` does). The text
is the indexed text (see `stale`)."""

NEIGHBORS_DESCRIPTION = """The link graph around a note: its outgoing [[links]], its
![[embeds]], and its backlinks (other notes linking to it), each resolved to the
linked note's doc_id, title and path (or `resolved: null` when no indexed note
matches). Name the note by `id` or `source` + `path`, as for `open`. For a code
file (or chunk) of a git source: the other functions and classes of the file
(`symbols`) and the latest commits that changed it (`commits`); for a commit: the
files it changed (`links`). For a mail message: every message of its thread
(`thread`, oldest first) and its attachments (`links`); for an attachment: its
message (`links`) and thread."""

LIST_SOURCES_DESCRIPTION = """List the sources you can search (name, kind, number of
files, documents and chunks, when each was last indexed)."""

STATUS_DESCRIPTION = """Index health per source: counts, last indexed time and run,
files changed on disk since then (pending changes), and files that failed to index
(errors), were skipped, or have warnings."""

REINDEX_DESCRIPTION = """Re-index one source now (e.g. after `status` shows pending
changes) and report the outcome: counts of new, changed and deleted files, chunks
embedded, and errors. Goes through the running Dagster UI when there is one,
otherwise runs in-process. Waits up to `wait_seconds` (default 50, below common
client timeouts); if the run is still going then, call `reindex` again for the same
source to keep waiting — it does not start a second run."""


def register_tools(server: MCPServer, service: RaglineService, resolve: AccessResolver) -> None:
    """Add ragline's tools to ``server``; ``resolve`` names the caller's access."""

    config = service.config
    # Server paths a message may name; only the local user sees them.
    roots = [config.data_dir, *(s.path for s in config.sources if s.path), Path.home()]

    async def call(fn: Callable[..., T], /, **kwargs: object) -> T:
        access = resolve()
        try:
            # Abandoned on cancel (the client cancelled, or left and closed stdin): the
            # thread finishes on its own, and the server can answer or exit at once.
            return await anyio.to_thread.run_sync(
                functools.partial(fn, access, **kwargs), abandon_on_cancel=True
            )
        except RaglineError as exc:
            message = one_line(str(exc))
            raise ToolError(message if access.local else redact_paths(message, roots)) from exc
        except Exception as exc:
            log.exception("ragline: %s failed", getattr(fn, "__name__", "tool"))
            raise ToolError(crash_reason(exc, local=access.local, roots=roots)) from exc

    async def search(
        query: Annotated[
            str, Field(description="What to look for, in natural language or keywords.")
        ],
        k: Annotated[
            whole(1, 100) | None,
            Field(description="Number of hits (default: the server's [search] k, 10 unless set)."),
        ] = None,
        mode: Annotated[
            Literal["hybrid", "bm25", "vector"] | None,
            Field(
                description="hybrid (BM25 and vectors fused), bm25 (keywords) or vector "
                "(meaning); default: the server's [search] mode, hybrid unless set."
            ),
        ] = None,
        sources: Annotated[list[str] | None, Field(description="Only these sources.")] = None,
        kinds: Annotated[
            list[str] | None,
            Field(description="Only these kinds of source, e.g. 'markdown', 'documents', 'git'."),
        ] = None,
        types: Annotated[
            list[str] | None,
            Field(
                description="Only these file types, e.g. 'pdf', 'docx', 'md', 'python' (a code "
                "file's type is its language), 'commit', 'email', 'entry'; aliases such as "
                "'markdown' or 'py' are accepted."
            ),
        ] = None,
        path_prefix: Annotated[
            str | None,
            Field(
                description="Only paths starting with this, relative to the source root "
                "(end it with '/' for a folder)."
            ),
        ] = None,
        tags: Annotated[
            list[str] | None,
            Field(description="Only items with all these tags (a tag matches its nested tags)."),
        ] = None,
        after: Annotated[
            str | None,
            Field(
                description="Only items dated on or after this (YYYY-MM-DD or ISO 8601): each "
                "item's own date, as its hits show it in `modified` (see the tool's "
                "description)."
            ),
        ] = None,
        before: Annotated[
            str | None,
            Field(
                description="Only items dated before this (YYYY-MM-DD or ISO 8601), by the "
                "same date as `after`."
            ),
        ] = None,
        languages: Annotated[
            list[str] | None,
            Field(
                description="Only code in these languages, e.g. 'python', 'go', 'typescript' "
                "(aliases such as 'py', 'golang', 'c++' accepted)."
            ),
        ] = None,
        symbols: Annotated[
            list[str] | None,
            Field(
                description="Only code chunks defining these functions, methods or classes, "
                "e.g. 'retry_upload' or 'UploadClient.retry_upload'; a hit's `symbol` names "
                "the one that matched."
            ),
        ] = None,
        authors: Annotated[
            list[str] | None,
            Field(
                description="Only items by these authors (name or e-mail): commits, books, "
                "feed entries, and messages by their sender."
            ),
        ] = None,
        rerank: Annotated[
            Flag | None,
            Field(
                description="Re-score the top hits with the configured reranker (slower, often "
                "more precise); default: the server's setting. An error if none is configured."
            ),
        ] = None,
        expand: Annotated[
            whole(1, MAX_CONTEXT_CHARS) | None,
            Field(
                description="A budget in characters (e.g. 6000): each hit comes with "
                "`context`, the hit grown to its section (heading section, page, whole "
                "function, message), the budget shared by all hits, best first; a hit inside "
                "a better hit's context points at it instead of repeating it. Saves an "
                "`open` per hit."
            ),
        ] = None,
        collapse: Annotated[
            Flag | None,
            Field(
                description="One hit per document, its best chunk, with `more_sections` "
                "counting its other matching chunks (default: the server's setting, on "
                "unless changed); false: every matching chunk, several of one document too."
            ),
        ] = None,
        **kind_values: list[str] | None,
    ) -> SearchOutput:
        request = SearchRequest(
            query=query,
            k=k,
            mode=mode,
            rerank=rerank,
            expand=expand,
            collapse=collapse,
            **{name: tuple(values or ()) for name, values in kind_values.items()},
            sources=tuple(sources or ()),
            kinds=tuple(kinds or ()),
            path_prefix=path_prefix,
            tags=tuple(tags or ()),
            after=after,
            before=before,
            types=tuple(types or ()),
            languages=tuple(languages or ()),
            symbols=tuple(symbols or ()),
            authors=tuple(authors or ()),
        )
        return await call(service.search, request=request)

    async def open_note(
        id: Annotated[str | None, Field(description="A doc_id or chunk_id.")] = None,
        source: Annotated[str | None, Field(description="Source name (with `path`).")] = None,
        path: Annotated[str | None, Field(description="Path relative to the source root.")] = None,
        start_line: Annotated[
            whole(1) | None,
            Field(description="First file line to return (not with `section`)."),
        ] = None,
        end_line: Annotated[
            whole(1) | None,
            Field(description="Last file line to return (not with `section`)."),
        ] = None,
        section: Annotated[
            str | None,
            Field(
                description="A heading or heading path ('Install > Linux'), or a part's anchor "
                "('page=6'); not with start_line/end_line."
            ),
        ] = None,
        max_lines: Annotated[whole(1, 5000), Field(description="Cap on returned lines.")] = 400,
        max_chars: Annotated[
            whole(100, MAX_OPEN_CHARS),
            Field(
                description="Cap on returned characters; a longer range ends at next_line / "
                "next_char.",
            ),
        ] = DEFAULT_OPEN_CHARS,
        start_char: Annotated[
            whole(0), Field(description="Character of start_line to begin at (next_char).")
        ] = 0,
    ) -> OpenOutput:
        return await call(
            service.open,
            id=id,
            source=source,
            path=path,
            start_line=start_line,
            end_line=end_line,
            section=section,
            max_lines=max_lines,
            max_chars=max_chars,
            start_char=start_char,
        )

    async def neighbors(
        id: Annotated[str | None, Field(description="A doc_id or chunk_id.")] = None,
        source: Annotated[str | None, Field(description="Source name (with `path`).")] = None,
        path: Annotated[str | None, Field(description="Path relative to the source root.")] = None,
    ) -> NeighborsOutput:
        return await call(service.neighbors, id=id, source=source, path=path)

    async def list_sources() -> ListSourcesOutput:
        return await call(service.list_sources)

    async def status() -> StatusOutput:
        return await call(service.status)

    async def reindex(
        source: Annotated[str, Field(description="The source to index (see `list_sources`).")],
        full: Annotated[
            Flag, Field(description="Re-read and re-chunk every file (vectors are reused).")
        ] = False,
        wait_seconds: Annotated[
            number(0, 3600),
            Field(description="Seconds to wait for the run to end (default 50)."),
        ] = 50,
    ) -> ReindexOutput:
        return await call(service.reindex, source=source, full=full, wait_s=wait_seconds)

    search.__signature__ = with_kind_arguments(search)  # type: ignore[attr-defined]
    tools = (
        (search, "search", "Search notes", SEARCH_DESCRIPTION, READ_ONLY),
        (open_note, "open", "Open a note", OPEN_DESCRIPTION, READ_ONLY),
        (neighbors, "neighbors", "Links around a note", NEIGHBORS_DESCRIPTION, READ_ONLY),
        (list_sources, "list_sources", "List sources", LIST_SOURCES_DESCRIPTION, READ_ONLY),
        (status, "status", "Index status", STATUS_DESCRIPTION, READ_ONLY),
        (reindex, "reindex", "Re-index a source", REINDEX_DESCRIPTION, REINDEX),
    )
    for fn, name, title, description, hints in tools:
        server.add_tool(fn, name=name, title=title, description=description, annotations=hints)
    # Tools after retrieval, each in its own module: `ask` (when [mcp] ask_tool is on),
    # and `remember` / `clip`, which save files and so need a caller that may write.
    for module in (ask_tool, remember_tool, clip_tool):
        module.register(server, service, call)


def with_kind_arguments(tool: Callable[..., Any]) -> inspect.Signature:
    """``tool``'s signature with an optional list argument per registered kind filter
    (``senders``, ``series``…) in place of its ``**kind_values``, described as the kind
    describes it: the schema the MCP SDK builds from it lists them."""
    signature = inspect.signature(tool, eval_str=True)
    parameters = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    parameters += [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[list[str] | None, Field(description=f.description)],
        )
        for f in kind_filters()
    ]
    return signature.replace(parameters=parameters)
