"""``ragline clip URL|FILE``: save a web page or a PDF into the clippings folder
(``[clip]``) and index it, so it is searchable when the command returns: with
``ragline watch`` watching the source, its run is waited for; with ``ragline ui``
running, a run is queued there and waited for; else the source's partition runs
here."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from rag_serving.config import RaglineConfig
from ragline.output import console, err_console, print_json, safe_text

# How long a run queued in the running UI is waited for before the command returns.
UI_WAIT_S = 600.0
# How long the run of a running `ragline watch` is waited for before one is started here.
WATCH_WAIT_S = 120.0


@dataclass(frozen=True)
class Indexed:
    """How the clip's source was indexed."""

    success: bool | None  # None: still running when the wait ended
    via: str  # "in-process" | "dagster" | "watch"
    seconds: float
    error: str | None = None
    run_url: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"success": self.success, "via": self.via, "seconds": round(self.seconds, 2),
                "error": self.error, "run_url": self.run_url}  # fmt: skip


def register(cli: click.Group, handle_errors: Callable[..., Any], pass_context: Any) -> None:
    """Add the ``clip`` command to ``cli``."""

    @cli.command("clip")
    @click.argument("target", metavar="URL|FILE")
    @click.option("--tags", help="Tags to add, separated by commas: --tags reading,ml")
    @click.option(
        "--source", "source_name", help="The source of notes to clip into (default: [clip] source)."
    )
    @click.option("--json", "as_json", is_flag=True, help="Print the outcome as one JSON object.")
    @pass_context
    @handle_errors
    def clip(
        ctx: Any, target: str, tags: str | None, source_name: str | None, as_json: bool
    ) -> None:
        """Save a web page (its main text, as a note) or a PDF into the clippings folder
        and index it: <folder>/<YYYY-MM>/<slug>.md with url, title, author, dates and tags
        in its frontmatter. A URL clipped before is not saved again."""
        sys.exit(run_clip(ctx.config, target, tags, source_name, as_json))


def run_clip(
    config: RaglineConfig, target: str, tags: str | None, source_name: str | None, as_json: bool
) -> int:
    """Clip, index, report; the exit code (1: saved but not indexed)."""
    from rag_serving.clipping import clip

    clipped = clip(
        config,
        target,
        tags=[t for t in (tags or "").split(",") if t.strip()],
        source_name=source_name,
        engine=lambda: _engine(config),
    )
    if clipped.duplicate:
        if as_json:
            print_json({**clipped.as_json(), "indexed": None})
        else:
            console.print(
                f"Already clipped: {safe_text(clipped.source)}:{safe_text(clipped.path)} "
                f"({safe_text(str(clipped.file))}); nothing saved"
            )
        return 0
    if not as_json:
        console.print(f"Saved {safe_text(str(clipped.file))}")
        if clipped.attachment:
            console.print(f"  with the PDF {safe_text(clipped.attachment)}")
        if clipped.tags:
            console.print(f"  tags: {safe_text(', '.join(clipped.tags))}")
        if clipped.tagging:
            console.print(f"  {safe_text(clipped.tagging)}")
    saved = [clipped.path, *([clipped.attachment] if clipped.attachment else [])]
    indexed = index_clip(config, clipped.source, announce=not as_json, paths=saved)
    if as_json:
        print_json({**clipped.as_json(), "indexed": indexed.as_json()})
    elif indexed.success:
        console.print(
            f"Searchable now: {safe_text(clipped.source)} indexed in {indexed.seconds:.1f}s"
            + {
                "dagster": " (through the running Dagster UI)",
                "watch": " (by the running `ragline watch`)",
            }.get(indexed.via, "")
        )
    elif indexed.success is None:
        console.print(
            f"Queued: the run of {safe_text(clipped.source)} is still going after "
            f"{indexed.seconds:.0f}s; the clip is searchable once it ends ({indexed.run_url})"
        )
    else:
        err_console.print(
            f"[red]error:[/] saved, but indexing {safe_text(clipped.source)} failed: "
            f"{safe_text(indexed.error or 'no error message')}; run `ragline index "
            f"{safe_text(clipped.source)}`"
        )
    return 1 if indexed.success is False else 0


def index_clip(
    config: RaglineConfig, source: str, announce: bool = False, paths: Sequence[str] = ()
) -> Indexed:
    """Index ``source`` and wait: by the run of a ``ragline watch`` watching it (for
    ``paths``, relative to the source's root), else by a run of its partition through
    the running ``ragline ui`` when there is one (the run shows there), else in this
    process."""
    from rag_serving.mcp.dagster_client import running_webserver
    from rag_serving.watchers import live_watcher, wait_searchable

    watcher = live_watcher(config, source) if paths else None
    if watcher is not None:
        if announce:
            console.print(f"  `ragline watch` (pid {watcher.pid}) indexes it; waiting for its run")
        started = time.perf_counter()
        if wait_searchable(config, source, paths, WATCH_WAIT_S):
            return Indexed(True, "watch", time.perf_counter() - started)
        if announce:
            console.print(f"  no run of the watcher after {WATCH_WAIT_S:.0f}s; indexing here")

    url = running_webserver(config)
    if url is not None:
        from rag_serving.mcp.reindex import Reindexer

        if announce:
            console.print(f"  queued in the running Dagster UI ({url}); waiting for the run")
        outcome = Reindexer(config).run(source, False, UI_WAIT_S)
        if outcome.via == "dagster":
            return Indexed(outcome.success, "dagster", outcome.seconds, outcome.error,
                           outcome.run_url)  # fmt: skip
        return Indexed(outcome.success, outcome.via, outcome.seconds, outcome.error)
    from ragline.indexing import index_sources

    started = time.perf_counter()
    outcomes = index_sources(config, [source], False)
    failed = next((o for o in outcomes if not o.success), None)
    seconds = time.perf_counter() - started
    return Indexed(failed is None, "in-process", seconds, failed.error if failed else None)


def _engine(config: RaglineConfig) -> Any:
    from rag_serving.search import SearchEngine

    return SearchEngine(config)
