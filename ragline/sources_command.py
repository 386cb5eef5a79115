"""``ragline sources``: list configured and indexed sources; prune removed ones."""

from __future__ import annotations

from pathlib import Path

import click

from rag_serving.config import SOURCE_KINDS, RaglineConfig
from rag_sources.errors import RaglineError
from ragline.output import console, print_json, safe_text


def list_sources(config: RaglineConfig, as_json: bool) -> None:
    """Print the configured sources and any indexed source no longer configured."""
    from rag_assets.stages.prune import indexed_sources
    from rag_serving.index.store import IndexStore

    indexed = indexed_sources(IndexStore.of(config, read_only=True))
    rows = [
        {"name": s.name, "kind": s.kind, "path": str(s.path or ""), "configured": True,
         "indexed": s.name in indexed}
        for s in config.sources
    ]  # fmt: skip
    configured = {s.name for s in config.sources}
    rows += [
        {"name": n, "kind": None, "path": None, "configured": False, "indexed": True}
        for n in sorted(indexed - configured)
    ]
    if as_json:
        print_json(rows)
        return
    for row in rows:
        state = (
            ""
            if row["configured"]
            else "  [yellow](not configured: `ragline sources prune --yes` removes it)[/]"
        )
        path = safe_text(row["path"] or "-")
        console.print(f"{row['name']:<20} {row['kind'] or '-':<10} {path}{state}")


def prune(config: RaglineConfig, yes: bool) -> int:
    """Delete the data and partitions of sources no longer in the config."""
    from rag_assets.instance import open_instance
    from rag_assets.stages.prune import indexed_sources, prune_source
    from rag_serving.index.store import IndexStore

    store = IndexStore.of(config)
    configured = {s.name for s in config.sources}
    from rag_assets.partitions import SOURCES_PARTITIONS_NAME

    instance = open_instance(config.data_dir, dagster=config.dagster)
    partitions = set(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    stale = sorted((indexed_sources(store) | partitions) - configured)
    if not stale:
        console.print("Nothing to prune: every indexed source is configured.")
        return 0
    if not yes:
        console.print(f"Would delete the index data and partitions of: {', '.join(stale)}")
        raise RaglineError("nothing was deleted; run `ragline sources prune --yes` to delete them")
    for name in stale:
        removed = prune_source(store, name)
        if name in partitions:
            instance.delete_dynamic_partition(SOURCES_PARTITIONS_NAME, name)
        console.print(f"pruned {name}: " + ", ".join(f"{t} {n}" for t, n in removed.items() if n))
    return 0


def add_source(
    config: RaglineConfig, target: str, name: str | None, kind: str | None
) -> tuple[str, str, str]:
    """Append a source for ``target`` (a folder, an mbox or OPML file, a feed URL) to
    the config file; (name, kind, why that kind).

    The block is appended as text, so the file's comments and layout are kept; the
    result is validated and the file restored if it does not load.
    """
    from rag_serving.config import new_source_target, parse_config_file, source_block, source_name
    from rag_sources.errors import ConfigError

    path = config.config_path
    if path is None:
        raise ConfigError("internal error: the config was not loaded from a file")
    kind, reason, source = new_source_target(target, kind)
    name = name or source_name(source)
    if any(s.name == name for s in config.sources):
        raise ConfigError(f"{path}: a source named {name!r} exists; choose another with --name")
    for existing in config.sources:
        if existing.path is not None and str(Path(existing.path).resolve()) == source:
            raise ConfigError(f"{source} is already the source {existing.name!r}")
    original = path.read_text(encoding="utf-8")
    separator = "" if original.endswith("\n") else "\n"
    path.write_text(original + separator + source_block(name, kind, source), encoding="utf-8")
    try:
        parse_config_file(path)
    except ConfigError:
        path.write_text(original, encoding="utf-8")
        raise
    return name, kind, reason


def register(cli: click.Group, handle_errors, pass_context) -> None:
    """Add the ``sources`` command group to ``cli``."""

    @cli.group()
    def sources() -> None:
        """Configured and indexed sources."""

    @sources.command("list")
    @click.option("--json", "as_json", is_flag=True)
    @pass_context
    @handle_errors
    def list_command(ctx, as_json: bool) -> None:
        """List configured sources and indexed ones that are no longer configured."""
        list_sources(ctx.config, as_json)

    @sources.command("add")
    @click.argument("path")
    @click.option("--name", help="Source name (default: derived from the folder name).")
    @click.option(
        "--kind", type=click.Choice(SOURCE_KINDS), help="Source kind (default: detected)."
    )
    @pass_context
    @handle_errors
    def add_command(ctx, path: str, name: str | None, kind: str | None) -> None:
        """Add a source for PATH to the config file, its kind detected: `.git` → git,
        `metadata.db` → calibre, a Maildir or a tree of Maildirs (nested, Maildir++),
        mbox or .eml files → mail, `.obsidian/` or mostly Markdown → markdown, other
        folders → documents; a feed URL, feed file or OPML file → feeds. The reason is
        printed; --kind overrides it."""
        added, chosen, reason = add_source(ctx.config, path, name, kind)
        console.print(f"Added source {added!r}: kind {chosen} ({reason})")
        console.print(f"Next: ragline index {added}")

    @sources.command("prune")
    @click.option(
        "--yes", is_flag=True, help="Really delete (without it, only show what would go)."
    )
    @pass_context
    @handle_errors
    def prune_command(ctx, yes: bool) -> None:
        """Delete rows, full-text entries and partitions of sources removed from the config."""
        prune(ctx.config, yes)
