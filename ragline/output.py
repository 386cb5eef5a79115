"""Rendering results for people (rich) and for scripts (JSON)."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rag_serving.search.engine import SearchResult
from rag_serving.status import IndexStatus

console = Console()
err_console = Console(stderr=True)
_BOLD = re.compile(r"\*\*(.+?)\*\*")


def print_json(data: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")


def render_search(result: SearchResult, explain: bool) -> None:
    if result.notice:
        err_console.print(f"[yellow]note:[/] {escape(result.notice)}")
    if not result.hits:
        console.print(f"[yellow]No results for[/] {escape(result.query)!r} ({result.mode}).")
        return
    for hit in result.hits:
        where = f"{hit.source}:{hit.path}"
        anchor = f" › {escape(hit.anchor)}" if hit.anchor else ""
        console.print(
            f"[bold cyan]{hit.rank:>2}.[/] [bold]{escape(hit.title)}[/]{anchor}  "
            f"[dim]{escape(where)}:{hit.line_start}-{hit.line_end}  score {hit.score:.4f}[/]"
        )
        snippet = _BOLD.sub(
            lambda m: f"[bold yellow]{escape(m.group(1))}[/]", _escape_keep_bold(hit.snippet)
        )
        if "=" in hit.location.rpartition("#")[2]:  # a page, slide, sheet or chapter
            console.print(f"    [dim]at[/] {escape(hit.location)}")
        console.print(f"    {snippet}")
        if hit.stale:
            console.print(f"    [yellow]stale: the file was {hit.stale} after it was indexed[/]")
        if explain:
            parts = [
                f"{name}: rank {e['rank']} score {e['score']:.4f} (+{e['contribution']:.5f})"
                for name, e in hit.explain.items()
            ]
            console.print(f"    [dim]explain: {'; '.join(parts) or '-'}[/]")


def _escape_keep_bold(text: str) -> str:
    pieces = _BOLD.split(text)
    # split keeps captured groups at odd positions
    return "".join(escape(p) if i % 2 == 0 else f"**{p}**" for i, p in enumerate(pieces))


def _pending(s: Any) -> str:
    if s.pending_error:
        return "[red]unreadable[/]"
    if s.pending is None:
        return "-"
    if not s.pending.total:
        return "0"
    p = s.pending
    return f"[yellow]{p.total}[/] (+{p.new} ~{p.changed} -{p.deleted})"


def render_status(status: IndexStatus) -> None:
    console.print(
        f"[bold]Index[/] {escape(status.data_dir)}  embedder: {status.embedder or 'none yet'}"
    )
    if status.building:
        console.print(
            f"[yellow]Building vectors for {status.building}; search uses the embedder "
            "above until every source is done.[/]"
        )
    table = Table(show_edge=False)
    columns = (
        "source",
        "kind",
        "files",
        "documents",
        "chunks",
        "last indexed",
        "pending",
        "errors",
        "skipped",
    )
    for column in columns:
        table.add_column(column)
    for s in status.sources:
        errors = sum(1 for i in s.issues if i.severity == "error")
        skipped = sum(1 for i in s.issues if i.severity == "skipped")
        name = s.name if s.configured else f"{s.name} (not configured)"
        last = s.last_indexed_at.strftime("%Y-%m-%d %H:%M UTC") if s.last_indexed_at else "never"
        table.add_row(
            escape(name), s.kind, str(s.files), str(s.documents), str(s.chunks), last,
            _pending(s), f"[red]{errors}[/]" if errors else "0", str(skipped),
        )  # fmt: skip
    console.print(table)
    for s in status.sources:
        if s.pending_error:
            console.print(f"  [red]unreadable[/] {escape(s.name)}: {escape(s.pending_error)}")
        for issue in s.issues:
            if issue.severity == "warning":
                continue
            colour = {"error": "red", "pending": "cyan"}.get(issue.severity, "yellow")
            console.print(
                f"  [{colour}]{issue.severity}[/] {escape(s.name)}:{escape(issue.path)}: "
                f"{escape(issue.message)}"
            )
