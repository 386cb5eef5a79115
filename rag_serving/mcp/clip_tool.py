"""The MCP `clip` tool: save a web page or a PDF into the clippings folder (``[clip]``)
and index it. It writes files, so only a caller that may write gets to use it (a
token with ``write = true``; over stdio, ``[mcp] stdio_write = true``). An agent's
URL may not lead to this machine or a private network unless its host is one of
``[clip] allow_hosts``; it may not name local files."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from rag_serving.config import RaglineConfig
from rag_serving.mcp.arguments import number
from rag_serving.mcp.auth import Access, write_refusal
from rag_serving.mcp.tool_errors import redact_paths
from rag_sources.errors import RaglineError
from rag_sources.net.fetch import url_reach
from rag_sources.net.network import PUBLIC

DEFAULT_WAIT_S = 50.0

CLIP_DESCRIPTION = """Save a web page or a PDF into the user's notes and index it, so
`search` finds it right away. A page becomes a Markdown note of its main text; a PDF is
kept as a PDF beside a note that embeds it. Both go to the configured clippings folder
as `<YYYY-MM>/<slug>.md`, with url, canonical_url, title, author, published and fetched
dates and tags in the frontmatter (`tags` become the `tags` filter of `search`). A URL
clipped before is not saved again: the answer has `duplicate: true` and the path of the
first copy. Give an http(s) URL; pages on this machine or a private network are refused
unless the server allows their host. Needs write permission. Waits up to `wait_seconds`
(default 50) for indexing; if `indexed` is null then, call `reindex` for the source to
keep waiting."""

CLIP = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)


class ClipOutput(BaseModel):
    source: str = Field(description="The source the clip was saved in.")
    path: str = Field(description="The note, relative to the source (for `open`).")
    title: str
    url: str
    canonical_url: str
    duplicate: bool = Field(description="Clipped before: `path` is the first copy.")
    attachment: str | None = Field(None, description="The PDF beside the note, if one.")
    tags: list[str] = Field(default_factory=list)
    tagging: str | None = Field(None, description="What auto-tagging did, or why it was skipped.")
    indexed: bool | None = Field(
        None, description="Indexed and searchable (null: still indexing when the wait ended)."
    )
    summary: str = Field(description="One line saying what happened.")


class ClipRefused(RaglineError):
    """The caller may not clip."""


def register(server: Any, service: Any, call: Any) -> None:
    """Add the `clip` tool to ``server`` when ``[clip] source`` is configured."""
    config: RaglineConfig = service.config
    if not config.clip.source:
        return

    def run(
        access: Access, url: str, tags: list[str], source: str | None, wait_s: float
    ) -> ClipOutput:
        from rag_serving.clipping import clip  # loaded only by a server that clips

        check_may_clip(access, config, source or config.clip.source or "")
        clipped = clip(
            config,
            url,
            tags=tags,
            source_name=source,
            reach=agent_reach(config, url),
            allow_local=False,
            engine=lambda: service.engine,
            visible=access.can_see,
        )
        output = ClipOutput(
            source=clipped.source,
            path=clipped.path,
            title=clipped.title,
            url=clipped.url,
            canonical_url=clipped.canonical_url,
            duplicate=clipped.duplicate,
            attachment=clipped.attachment,
            tags=clipped.tags,
            tagging=clipped.tagging,
            summary="",
        )
        if clipped.duplicate:
            output.summary = f"already clipped as {clipped.path}; nothing saved"
            return output
        outcome = service.reindexer.run(clipped.source, False, wait_s)
        output.indexed = outcome.success
        if outcome.success:
            output.summary = f"saved {clipped.path}; searchable now"
        elif outcome.success is None:
            output.summary = (
                f"saved {clipped.path}; still indexing after {outcome.seconds:.0f}s (call "
                f"`reindex` for {clipped.source!r} to wait)"
            )
        else:
            output.summary = f"saved {clipped.path}; indexing failed: {outcome.error}"
            if not access.local:
                roots = [s.path for s in config.sources if s.path] + [config.data_dir]
                output.summary = redact_paths(output.summary, roots)
        return output

    async def clip_tool(
        url: Annotated[str, Field(description="The http(s) URL of the page or PDF to save.")],
        tags: Annotated[
            list[str] | None,
            Field(description="Tags for the note (letters, digits, '-', '_', '/')."),
        ] = None,
        source: Annotated[
            str | None,
            Field(description="The source of notes to save into (default: the server's)."),
        ] = None,
        wait_seconds: Annotated[
            number(0, 3600),
            Field(description="Seconds to wait for indexing (default 50)."),
        ] = DEFAULT_WAIT_S,
    ) -> ClipOutput:
        return await call(run, url=url, tags=list(tags or []), source=source, wait_s=wait_seconds)

    server.add_tool(
        clip_tool, name="clip", title="Clip a page", description=CLIP_DESCRIPTION, annotations=CLIP
    )


def check_may_clip(access: Access, config: RaglineConfig, source: str) -> None:
    """Refuse, in one line naming the setting that grants it, a caller that may not
    write, or may not see the clippings source."""
    refusal = write_refusal(access, "clip (it saves files)")
    if refusal is not None:
        raise ClipRefused(refusal)
    if not access.can_see(source):
        raise ClipRefused(f"unknown source {source!r}; clip into a source this token may see")


def agent_reach(config: RaglineConfig, url: str) -> int:
    """How far an agent's URL may lead: public addresses only, unless its host is one
    of ``[clip] allow_hosts`` (then as far as that host's own network)."""
    host = (urlsplit(url).hostname or "").lower()
    if not host:
        return PUBLIC  # not a web address: the download says so
    try:
        own = url_reach(url)
    except (ValueError, httpx.InvalidURL):
        return PUBLIC  # not a valid URL: the download says so
    if host in {h.lower() for h in config.clip.allow_hosts}:
        return own
    if own > PUBLIC:
        raise ClipRefused(
            f"{url}: {host} is on this machine or a private network, which an agent may "
            "clip from only when [clip] allow_hosts in the server's config lists it"
        )
    return PUBLIC
