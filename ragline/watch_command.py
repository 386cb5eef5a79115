"""``ragline watch``: keep sources fresh within seconds of a save."""

from __future__ import annotations

import contextlib
import signal
import threading

import click

from rag_serving.config import RaglineConfig
from ragline.indexing import MaintenanceOutcome
from ragline.output import console, err_console, safe_text
from ragline.watching import DEBOUNCE_MS, MAINTAIN_AFTER_S, STEP_MS, SourceWatcher, WatchRun


def run_watch(
    config: RaglineConfig,
    names: list[str],
    catch_up: bool,
    step_ms: int,
    maintain_after_s: int = MAINTAIN_AFTER_S,
) -> None:
    """Watch and index until Ctrl-C, one line per run."""
    from rag_serving.config import require_usable

    require_usable(config, names or None)
    watcher = SourceWatcher(
        config, names, step_ms=step_ms, debounce_ms=max(step_ms, DEBOUNCE_MS),
        maintain_after_s=maintain_after_s or None,
    )  # fmt: skip
    for note in watcher.notes:
        err_console.print(f"[yellow]not watched:[/] {safe_text(note)}")

    def ready() -> None:
        shown = ", ".join(s.name for s in watcher.sources)
        console.print(f"Watching {shown}; Ctrl-C stops. Runs show in `ragline ui` as well.")

    stop = threading.Event()
    stop_on_signals(stop)
    with contextlib.suppress(KeyboardInterrupt):
        watcher.run(
            on_run=print_run, stop=stop, on_ready=ready, catch_up=catch_up,
            on_maintenance=print_maintenance,
        )  # fmt: skip


def stop_on_signals(stop: threading.Event) -> None:
    """SIGINT, SIGTERM and SIGHUP stop watching once the run in progress ends; a second
    one interrupts that run. Set explicitly: started by a script (``cmd &``), the
    process inherits SIGINT and SIGTERM ignored."""

    def handle(signum: int, _frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, handle)


def print_run(run: WatchRun) -> None:
    o = run.outcome
    if not o.success:
        err_console.print(f"[bold red]✗ {o.source}: {safe_text(o.error or 'failed')}[/]  "
                          f"[dim]run {o.run_id[:8]}[/]")  # fmt: skip
        return
    files = o.metadata.get("raw_files", {})
    emb = o.metadata.get("embeddings", {})
    why = f"{run.changed_paths} path(s) changed" if run.changed_paths else "whole source"
    if run.changed_paths and run.whole:
        why += ", whole source"
    console.print(
        f"[green]✓[/] {o.source} ({why}): {files.get('new', 0)} new, "
        f"{files.get('changed', 0)} changed, {files.get('deleted', 0)} deleted; "
        f"{emb.get('embedded', 0)} chunks embedded in {o.seconds:.1f}s  [dim]run {o.run_id[:8]}[/]"
    )


def print_maintenance(outcome: MaintenanceOutcome) -> None:
    if outcome.success:
        console.print(f"[green]✓[/] index compacted in {outcome.seconds:.1f}s  "
                      f"[dim]run {outcome.run_id[:8]}[/]")  # fmt: skip
    else:
        err_console.print(f"[bold red]✗ maintenance: {safe_text(outcome.error or 'failed')}[/]"
                          f"  [dim]run {outcome.run_id[:8]}[/]")  # fmt: skip


def register(cli: click.Group, handle_errors, pass_context) -> None:
    """Add the ``watch`` command to ``cli``."""

    @cli.command()
    @click.argument("sources", nargs=-1)
    @click.option(
        "--no-catch-up", is_flag=True,
        help="Do not index what changed while nothing watched (the first run per source).",
    )  # fmt: skip
    @click.option(
        "--step-ms", type=click.IntRange(10, 10_000), default=STEP_MS, show_default=True,
        help="Saves closer together than this are indexed in one run.",
    )  # fmt: skip
    @click.option(
        "--maintain-after", type=click.IntRange(0, 7 * 24 * 3600), default=MAINTAIN_AFTER_S,
        show_default=True, metavar="SECONDS",
        help="Compact the index after runs once nothing changed for this long (0: never).",
    )  # fmt: skip
    @pass_context
    @handle_errors
    def watch(
        ctx, sources: tuple[str, ...], no_catch_up: bool, step_ms: int, maintain_after: int
    ) -> None:
        """Index SOURCES (all when none is named) within seconds of each save: file
        events start a run of just the touched source in this process (recorded in
        Dagster, shown by `ragline ui`). Sources without a folder (feeds) are left to
        the sensor of `ragline ui`."""
        names = [ctx.config.source(name).name for name in sources]
        run_watch(ctx.config, names, not no_catch_up, step_ms, maintain_after)
