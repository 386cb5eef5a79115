"""``ragline index``: run the indexing job per source with a progress display."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rag_serving.config import RaglineConfig
from ragline.output import console, err_console, print_json, safe_text

STAGES = {"scan": "scanning", "parse": "parsing", "chunk": "chunking", "embed": "embedding",
          "fulltext": "full-text", "ocr": "OCR"}  # fmt: skip


def run_index(config: RaglineConfig, sources: list[str], full: bool, as_json: bool) -> bool:
    """Index and report; True when every source's run succeeded."""
    from ragline.indexing import index_sources

    progress = Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=as_json,
    )
    tasks: dict[tuple[str, str], int] = {}

    def on_progress(source: str, stage: str, done: int, total: int) -> None:
        key = (source, stage)
        if key not in tasks:
            tasks[key] = progress.add_task(f"{source}: {STAGES.get(stage, stage)}", total=total)
        progress.update(tasks[key], completed=done, total=max(total, 1))

    with progress:
        outcomes = index_sources(config, sources, full, on_progress)
    if as_json:
        print_json(
            [
                {
                    "source": o.source,
                    "run_id": o.run_id,
                    "pass": "deferred" if o.deferred_pass else "first",
                    "success": o.success,
                    "seconds": round(o.seconds, 2),
                    "error": o.error,
                    "assets": o.metadata,
                }
                for o in outcomes
            ]
        )
    else:
        for o in outcomes:
            if o.success and o.deferred_pass:
                docs = o.metadata.get("parsed_documents", {})
                emb = o.metadata.get("embeddings", {})
                console.print(
                    f"[green]✓[/] {o.source} (deferred pass: OCR): {docs.get('changed', 0)} "
                    f"documents completed, {docs.get('failed', 0)} failed; "
                    f"{emb.get('embedded', 0)} chunks embedded in {o.seconds:.1f}s  "
                    f"[dim]run {o.run_id[:8]}[/]"
                )
            elif o.success:
                files = o.metadata.get("raw_files", {})
                docs = o.metadata.get("parsed_documents", {})
                emb = o.metadata.get("embeddings", {})
                console.print(
                    f"[green]✓[/] {o.source}: {files.get('dagster/row_count', 0)} files "
                    f"({files.get('new', 0)} new, {files.get('changed', 0)} changed, "
                    f"{files.get('deleted', 0)} deleted), {docs.get('failed', 0)} failed, "
                    f"{docs.get('skipped', 0)} skipped; {emb.get('dagster/row_count', 0)} chunks "
                    f"({emb.get('embedded', 0)} embedded) in {o.seconds:.1f}s  [dim]run {o.run_id[:8]}[/]"
                )
            else:
                err_console.print(
                    f"[bold red]✗ {o.source}: {safe_text(o.error or 'failed')}[/]  [dim]run {o.run_id[:8]}[/]"
                )
    return all(o.success for o in outcomes)
