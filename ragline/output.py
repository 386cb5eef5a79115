"""Rendering results for people (rich) and for scripts (JSON)."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rag_serving.search.engine import UNCHECKED, SearchHit, SearchResult
from rag_serving.status import IndexStatus, SourceStatus, short_message
from rag_serving.text import printable
from rag_sources.kinds import registered_kinds

if TYPE_CHECKING:
    from ragline.indexing import ProblemCounts, SourceRunOutcome

console = Console()
err_console = Console(stderr=True)
_BOLD = re.compile(r"\*\*(.+?)\*\*")
STATUS_WIDTH = 80
MAX_LISTED = 10  # groups of problems listed per source and severity


def print_json(data: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def render_search(result: SearchResult, explain: bool) -> None:
    if result.notice:
        err_console.print(f"[yellow]note:[/] {escape(result.notice)}")
    if not result.hits:
        console.print(f"[yellow]No results for[/] {safe_text(repr(result.query))} ({result.mode}).")
        return
    ranks = {hit.chunk_id: hit.rank for hit in result.hits}
    for hit in result.hits:
        console.print(
            f"[bold cyan]{hit.rank:>2}.[/] {_hit_line(hit)}  [dim]score {hit.score:.4f}[/]"
        )
        snippet = _BOLD.sub(
            lambda m: f"[bold yellow]{escape(m.group(1))}[/]",
            _escape_keep_bold(printable(" ".join(hit.snippet.split()))),
        )
        part = hit.location.rpartition("#")[2]
        if part.startswith("diff="):  # a commit's diff of one file
            console.print(f"    [dim]in the diff of[/] {safe_text(part[len('diff=') :])}")
        elif "=" in part:  # a page, slide, sheet or chapter
            console.print(f"    [dim]at[/] {safe_text(hit.location)}")
        if hit.context is None:
            console.print(f"    {snippet}")
        else:
            _render_context(hit, ranks)
        if hit.more_sections:
            console.print(
                f"    [dim]+{hit.more_sections} more matching section"
                f"{'s' if hit.more_sections > 1 else ''} here (--all-sections)[/]"
            )
        if hit.stale == UNCHECKED:
            console.print("    [dim]not checked for changes: the source's folder is not here[/]")
        elif hit.stale:
            console.print(f"    [yellow]stale: the file was {hit.stale} after it was indexed[/]")
        if explain:
            parts = [_explain_part(name, e) for name, e in hit.explain.items()]
            console.print(f"    [dim]explain: {'; '.join(parts) or '-'}[/]")
    if explain and result.timings:
        stages = ", ".join(f"{name} {ms:.1f}" for name, ms in result.timings.items())
        console.print(f"[dim]time (ms): {stages}[/]")


def _explain_part(name: str, e: dict[str, float]) -> str:
    """One stage's line in ``--explain``: a list's rank and contribution, the
    reranker's score, or the link prior's factor and its counts."""
    if name == "rerank":
        return f"{name}: score {e['score']:.4f} (rank {e['rank_before']} before)"
    if name == "role":  # [search.code]: what the query asks for, tests below
        return f"role: {e['score']:+.1f} spreads ({e['contribution']:+.5f})"
    if name == "links":
        return (
            f"{name}: ×{e['factor']:.3f} ({e['backlinks']:.0f} backlinks, "
            f"{e['linked_from_top']:.0f} from the top hits)"
        )
    line = f"{name}: rank {e['rank']} score {e['score']:.4f} (+{e['contribution']:.5f})"
    if "chunk_bm25" in e:  # the keyword score mixes the chunk's and its document's BM25
        document = e.get("document_bm25")
        whole = f"document {document:.2f}" if document is not None else "no document row"
        line += f" from chunk BM25 {e['chunk_bm25']:.2f} and {whole}"
    return line


def _render_context(hit: SearchHit, ranks: dict[str, int]) -> None:
    """A hit's context (``--context``): its section's lines, or where it was shown."""
    context = hit.context
    assert context is not None
    if context.same_as is not None:
        console.print(f"    [dim](in the context of hit {ranks.get(context.same_as, '?')})[/]")
        return
    whole = "" if context.complete else ", cut to the budget"
    section = f"{safe_text(context.section)}, " if context.section else ""
    console.print(f"    [dim]{section}lines {context.line_start}-{context.line_end}{whole}[/]")
    for line in context.text.split("\n"):
        console.print(f"    │ {safe_text(line)}", highlight=False)


def _hit_line(hit: SearchHit) -> str:
    """What a hit is and where: the line its kind gives (a commit's short id, date and
    author; a message's sender, date and folder…), else a note's title › heading and
    source:path:lines; a code chunk's source:path:lines and symbol; a book's title and
    author."""
    info = registered_kinds().get(hit.kind)
    byline = info.byline(hit) if info is not None and info.byline is not None else None
    if byline is not None:
        return f"[bold]{safe_text(hit.title)}[/]  [dim]{safe_text(byline)}[/]"
    where = f"{hit.source}:{hit.path}:{hit.line_start}-{hit.line_end}"
    if hit.symbol:
        return f"[bold]{safe_text(where)}[/]  {safe_text(hit.anchor)}"
    heading = hit.anchor
    if heading.startswith(hit.title + " > "):  # a book's chapters start with its title
        heading = heading[len(hit.title) + 3 :]
    anchor = f" › {safe_text(heading)}" if heading else ""
    by = f" — {safe_text(hit.author)}" if hit.author else ""  # a book's author
    return f"[bold]{safe_text(hit.title)}[/]{by}{anchor}  [dim]{safe_text(where)}[/]"


def _escape_keep_bold(text: str) -> str:
    pieces = _BOLD.split(text)
    # split keeps captured groups at odd positions
    return "".join(escape(p) if i % 2 == 0 else f"**{p}**" for i, p in enumerate(pieces))


def safe_text(text: str) -> str:
    """``text`` for a rich console: control characters escaped, markup literal."""
    return escape(printable(text))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def problems_phrase(problems: ProblemCounts | None, items: int) -> str:
    """A source's problems after a run, standing now (not only what the run found):
    ``no problems``; ``4 problems unchanged (1 of 12 items failed, 3 skipped)``;
    ``1 of 12 items failed, 3 skipped (2 found by this run)``."""
    if problems is None:
        return ""
    if not problems.total:
        return "no problems"
    parts = []
    if problems.failed:
        parts.append(f"{problems.failed} of {_plural(items, 'item')} failed")
    if problems.skipped:
        parts.append(f"{problems.skipped} skipped")
    counts = ", ".join(parts)
    if not problems.found:
        return f"{_plural(problems.total, 'problem')} unchanged ({counts})"
    return f"{counts} ({problems.found} found by this run)"


def outcome_line(o: SourceRunOutcome) -> str:
    """One run of ``ragline index`` (and of ``ragline watch``) as a line of markup: what
    changed, how the source stands (its problems, however old), the chunks."""
    run = f"  [dim]run {o.run_id[:8]}[/]"
    if not o.success:
        return f"[bold red]✗ {safe_text(o.source)}: {safe_text(o.error or 'failed')}[/]{run}"
    files = o.metadata.get("raw_files", {})
    docs = o.metadata.get("parsed_documents", {})
    emb = o.metadata.get("embeddings", {})
    problems = o.problems
    mark = "[yellow]✓[/]" if problems is not None and problems.failed else "[green]✓[/]"
    state = problems_phrase(problems, o.items)
    tail = f"; {state}" if state else ""
    if problems is not None and problems.total:
        tail += " — `ragline status` lists them"
    if docs.get("auto_tags"):
        tail += f"; {safe_text(str(docs['auto_tags']))}"
    if o.deferred_pass:
        return (
            f"{mark} {safe_text(o.source)} (deferred pass: OCR): {docs.get('changed', 0)} "
            f"documents completed{tail}; {emb.get('embedded', 0)} chunks embedded in "
            f"{o.seconds:.1f}s{run}"
        )
    return (
        f"{mark} {safe_text(o.source)}: {_plural(o.items, 'item')} ({files.get('new', 0)} new, "
        f"{files.get('changed', 0)} changed, {files.get('deleted', 0)} deleted), "
        f"{o.indexed} indexed{tail}; {o.chunks} chunks ({emb.get('embedded', 0)} embedded) "
        f"in {o.seconds:.1f}s{run}"
    )


def _pending(s: SourceStatus) -> str:
    if s.pending_error:
        return "[red]n/a[/]"
    if s.pending is None:
        return "-"
    return f"[yellow]{s.pending.total}[/]" if s.pending.total else "0"


def _age(moment: datetime | None, now: datetime) -> str:
    """How long ago, in the largest unit that fits: ``5 min ago``, ``3 d ago``."""
    if moment is None:
        return "never"
    seconds = max(0, int((now - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return "just now"


def _count(value: int, colour: str) -> str:
    return f"[{colour}]{value}[/]" if value else "0"


def render_status(status: IndexStatus, width: int = STATUS_WIDTH) -> None:
    """The index, one table row per source (fits ``width`` columns), then what needs
    attention: failed runs, unreadable sources, pending changes, problem items."""
    out = Console(width=min(console.width, width)) if console.is_terminal else console
    out.print(f"[bold]Index[/] {safe_text(status.data_dir)}")
    out.print(f"embedder: {safe_text(status.embedder or 'none yet')}")
    if status.device:
        out.print(f"documents embedded on: {safe_text(status.device)}")
    if status.building:
        out.print(
            f"[yellow]Building vectors for {safe_text(status.building)}; search uses the "
            "embedder above until every source is done.[/]"
        )
    now = datetime.now(UTC)
    table = Table(box=None, pad_edge=False, padding=(0, 1), collapse_padding=True)
    table.add_column("source", overflow="ellipsis", no_wrap=True, max_width=16)
    table.add_column("kind", overflow="ellipsis", no_wrap=True, max_width=9)
    for name in ("docs", "chunks"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("indexed", no_wrap=True)
    for name in ("pending", "errors", "skipped", "warns"):
        table.add_column(name, justify="right", no_wrap=True)
    for s in status.sources:
        name = s.name if s.configured else f"{s.name} (gone)"
        indexed = _age(s.last_indexed_at, now)
        if s.last_failure is not None:
            indexed = "[red]FAILED[/]"
        table.add_row(
            safe_text(name), s.kind, str(s.documents), str(s.chunks), indexed, _pending(s),
            _count(s.count("error"), "red"), _count(s.count("skipped"), "yellow"),
            _count(s.count("warning"), "yellow"),
        )  # fmt: skip
    out.print(table)
    for s in status.sources:
        _render_attention(out, s, now)


def _render_attention(out: Console, s: SourceStatus, now: datetime) -> None:
    name = safe_text(s.name)
    if s.last_failure is not None:
        failure = s.last_failure
        step = f" in {failure.step}" if failure.step else ""
        out.print(
            f"[red]failed[/] {name}: the last run ({_age(failure.failed_at, now)}){step}: "
            f"{safe_text(failure.message)}"
        )
    if s.pending_error:
        out.print(f"[red]unavailable[/] {name}: {safe_text(s.pending_error)}")
    elif s.pending is not None and s.pending.total:
        p = s.pending
        out.print(
            f"[yellow]pending[/] {name}: {p.new} new, {p.changed} changed, {p.deleted} deleted "
            "since the last completed run"
        )
    groups = s.issue_groups()
    for severity, colour in (("error", "red"), ("skipped", "yellow"), ("pending", "cyan")):
        mine = [g for g in groups if g.severity == severity]
        for group in mine[:MAX_LISTED]:
            message = safe_text(short_message(group.message))
            if group.count == 1:
                where = safe_text(group.examples[0])
                out.print(f"[{colour}]{severity}[/] {name}:{where}: {message}")
                continue
            examples = ", ".join(safe_text(path) for path in group.examples)
            out.print(
                f"[{colour}]{severity}[/] {name}: {group.count} items (e.g. {examples}): {message}"
            )
        if len(mine) > MAX_LISTED:
            rest = mine[MAX_LISTED:]
            out.print(
                f"[{colour}]{severity}[/] {name}: … and {sum(g.count for g in rest)} more in "
                f"{len(rest)} more groups (`ragline status --json` lists them all)"
            )
