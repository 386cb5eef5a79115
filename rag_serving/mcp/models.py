"""Structured outputs of the MCP tools (their JSON schemas are published to clients)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, create_model

from rag_sources.kinds import kind_hit_details, kind_relations


class DocRef(BaseModel):
    """A note in the index."""

    doc_id: str
    source: str
    path: str = Field(description="Path relative to the source's root.")
    title: str


class ContextOut(BaseModel):
    """A hit grown to its section within the search's `expand` budget."""

    section: str | None = Field(description="The heading path, page, slide or symbol.")
    line_start: int
    line_end: int
    text: str = Field(description="The section's lines (page headers and footers left out).")
    complete: bool = Field(description="False when the budget cut the section short.")
    same_as: str | None = Field(
        default=None,
        description="The chunk_id of a better hit whose context already holds this one "
        "(this one's text is then empty).",
    )


class HitBase(BaseModel):
    """One chunk found by ``search``, with everything needed to cite it (each kind's
    hit details are fields too: a message's ``folder``…)."""

    rank: int
    score: float
    source: str
    kind: str
    path: str = Field(description="Path relative to the source's root.")
    title: str
    heading: str = Field(description="Heading path of the chunk, e.g. 'Install > On Linux'.")
    anchor: str = Field(description="Obsidian link to the chunk, e.g. '[[Install#On Linux]]'.")
    location: str = Field(
        description="Where to cite: 'paper.pdf#page=6', 'deck.pptx#slide=3', 'Note.md#Heading'."
    )
    file_type: str | None = Field(
        description="pdf, md, docx, pptx, xlsx, html, epub, txt…; a code file's language "
        "(python, go…); commit, email, entry."
    )
    line_start: int = Field(
        description="First line of the chunk in the file (1-based; for PDFs, slides and "
        "books: in the extracted text that `open` returns)."
    )
    line_end: int = Field(description="Last line of the chunk (inclusive).")
    snippet: str = Field(description="Matched terms are wrapped in ** **.")
    chunk_id: str
    doc_id: str
    modified: str | None = Field(
        description="The item's date (ISO 8601), the one `after`/`before` filter on: a "
        "commit's date, a message's Date, a feed entry's date, a note's frontmatter or "
        "file-name date, else the file's modification time."
    )
    indexed_at: str | None
    stale: bool = Field(description="True when the file changed or vanished since indexing.")
    stale_reason: str | None = Field(
        description="'modified' or 'deleted' when stale; 'unchecked' (not stale) when the "
        "source's folder is not on the server's host, so its files cannot be compared."
    )
    symbol: str | None = Field(
        default=None,
        description="Code: the function, method or class the chunk defines, qualified "
        "('Client.retry'); with a `symbols` filter, the one that matched.",
    )
    language: str | None = Field(default=None, description="Code: its language.")
    author: str | None = Field(
        default=None,
        description="Commit, book or feed entry: its author; message: its sender.",
    )
    context: ContextOut | None = Field(
        default=None, description="With `expand`: the hit grown to its section."
    )
    more_sections: int = Field(
        default=0,
        description="Other chunks of this document that matched (one hit per document "
        "unless `collapse` is false): search again with `collapse=false` and the doc's "
        "`path_prefix` to see them.",
    )


Hit = create_model(
    "Hit",
    __base__=HitBase,
    **{
        detail.name: (str | None, Field(default=None, description=detail.description))
        for detail in kind_hit_details()
    },
)


class SearchOutput(BaseModel):
    query: str
    mode: str
    filters: dict[str, Any] = Field(description="The filters that were applied.")
    hits: list[Hit]
    notice: str | None = Field(
        default=None,
        description="Set when search could not use the configured embedder (a model switch "
        "in progress): which vectors answered instead.",
    )


class OpenOutput(BaseModel):
    """Text of an indexed note (or part of it), with its line numbers in the file."""

    doc_id: str
    chunk_id: str | None = Field(description="Set when a chunk was opened.")
    source: str
    kind: str
    path: str
    title: str
    aliases: list[str]
    tags: list[str]
    section: str | None = Field(
        description="The section returned, if any: a heading path, or a page, slide, sheet "
        "or chapter ('Page 6')."
    )
    anchor: str | None = Field(
        default=None, description="The anchor of the page, slide, sheet or chapter returned."
    )
    file_type: str | None = Field(default=None, description="pdf, md, docx…")
    line_start: int = Field(description="File line of the first returned line (1-based).")
    line_end: int = Field(description="File line of the last returned line (inclusive).")
    body_start_line: int = Field(description="First line after the YAML frontmatter.")
    last_line: int = Field(description="Last line of the note as indexed.")
    truncated: bool = Field(description="True when max_lines or max_chars cut the range short.")
    text: str
    next_line: int | None = Field(
        default=None,
        description="When max_chars cut the text short: the file line where the rest starts "
        "(open again with start_line=next_line and start_char=next_char).",
    )
    next_char: int | None = Field(
        default=None, description="The character of next_line where the rest starts."
    )
    frontmatter: dict[str, Any] | None = Field(
        description="Frontmatter properties (when the whole note or its start is returned)."
    )
    modified: str | None = Field(description="The item's date, as search hits show it.")
    indexed_at: str | None
    stale: bool
    stale_reason: str | None


class LinkOut(BaseModel):
    """An outgoing link or embed of a note, resolved like Obsidian does."""

    target: str = Field(description="Link target as written ('' for a link within the note).")
    heading: str | None
    block: str | None
    alias: str | None
    embed: bool
    line: int = Field(description="Line of the link in the linking file.")
    resolved: DocRef | None = Field(description="The linked note, or null when unresolved.")


class BacklinkOut(BaseModel):
    """A link from another note to this one."""

    source_note: DocRef = Field(description="The note that holds the link.")
    heading: str | None = Field(description="Heading of this note the link points at.")
    block: str | None
    alias: str | None
    embed: bool
    line: int = Field(description="Line of the link in the linking file.")


class SymbolOut(BaseModel):
    """A function, method, class… defined in a code file."""

    name: str = Field(description="Qualified name, e.g. 'UploadClient.retry_upload'.")
    kind: str | None = Field(description="function, method, class, struct, …")
    line_start: int
    line_end: int
    chunk_id: str = Field(description="Open it with `open` and this id.")


class NeighborsBase(BaseModel):
    """What ``neighbors`` answers for any document; each kind's relations add a list."""

    note: DocRef
    links: list[LinkOut] = Field(
        description="Outgoing [[links]] (not embeds); for a commit, the files it changed."
    )
    embeds: list[LinkOut] = Field(description="Outgoing ![[embeds]].")
    backlinks: list[BacklinkOut] = Field(
        description="Links and embeds from other notes (a link that a kind's own list "
        "holds, such as a commit that changed the file, is listed there instead)."
    )
    symbols: list[SymbolOut] = Field(
        default_factory=list,
        description="For code: the other functions, methods and classes of the file.",
    )
    omitted: dict[str, int] = Field(
        default_factory=dict,
        description="Per list cut at 200 entries (links, embeds, backlinks, symbols): how "
        "many more there are.",
    )


def _neighbors_output() -> type[NeighborsBase]:
    """``neighbors``' answer: the common lists, then every registered kind's relations
    (``thread``, ``commits``…), each empty where it does not apply."""
    fields: dict[str, Any] = {
        relation.name: (
            list[relation.item],  # type: ignore[name-defined]
            Field(default_factory=list, description=relation.description),
        )
        for relation in kind_relations()
    }
    return create_model("NeighborsOutput", __base__=NeighborsBase, **fields)


NeighborsOutput = _neighbors_output()


class SourceInfo(BaseModel):
    name: str
    kind: str
    configured: bool
    path: str | None = Field(description="Folder on the server (stdio only).")
    files: int
    documents: int
    chunks: int
    last_indexed_at: str | None


class ListSourcesOutput(BaseModel):
    sources: list[SourceInfo]


class FileIssueOut(BaseModel):
    path: str
    severity: str
    message: str


class ProblemGroupOut(BaseModel):
    """Problems of one severity that share a reason."""

    severity: str
    message: str = Field(description="The first item's message.")
    count: int
    examples: list[str] = Field(description="Paths of the first few items.")


class FailedRunOut(BaseModel):
    run_id: str
    step: str | None = Field(description="The stage that failed, when known.")
    message: str = Field(description="One line: what went wrong.")
    failed_at: str | None


class SourceStatusOut(SourceInfo):
    last_run_id: str | None
    last_failure: FailedRunOut | None = Field(
        default=None,
        description="The last run of this source that failed after its last completed run.",
    )
    pending_changes: dict[str, int] | None = Field(
        description="Items new/changed/deleted on disk that search does not serve yet."
    )
    pending_error: str | None
    problem_counts: dict[str, int] = Field(
        default_factory=dict,
        description="Items per severity: error, skipped, warning, pending.",
    )
    problem_groups: list[ProblemGroupOut] = Field(
        default_factory=list,
        description="Problems grouped by severity and reason, largest first (at most 20).",
    )
    errors: list[FileIssueOut] = Field(description="The first 20 items that failed.")
    skipped: list[FileIssueOut] = Field(description="The first 20 items skipped by rule.")
    warnings: list[FileIssueOut] = Field(description="The first 20 items indexed with a warning.")
    pending: list[FileIssueOut] = Field(
        default_factory=list,
        description="The first 20 items indexed without work queued for a deferred pass "
        "(OCR of pages).",
    )


class StatusOutput(BaseModel):
    embedder: str | None
    building_embedder: str | None = Field(
        description="An embedder whose vectors are being built (search uses the old ones)."
    )
    sources: list[SourceStatusOut]


class ReindexOutput(BaseModel):
    """The outcome of one indexing run of a source."""

    source: str
    via: str = Field(description="'dagster' (the running `ragline ui`) or 'in-process'.")
    run_id: str | None
    status: str = Field(description="SUCCESS, FAILURE, CANCELED, or QUEUED/STARTED on timeout.")
    success: bool | None = Field(description="None while the run is still going.")
    seconds: float
    error: str | None
    summary: str = Field(description="One line for people.")
    assets: dict[str, dict[str, Any]] = Field(description="Per asset: its run metadata counts.")
    run_url: str | None = Field(description="The run in the Dagster UI, when launched there.")
    documents: int | None = Field(description="Documents of the source after the run.")
    chunks: int | None = Field(description="Chunks of the source after the run.")
