"""``ragline``: a thin click CLI over rag_serving (search, status) and rag_assets
(indexing, the Dagster UI). Heavy modules are imported inside the commands that
need them so that ``ragline search`` starts fast."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from rag_serving.config import SOURCE_KINDS, RaglineConfig, load_config
from rag_serving.reading import MAX_CONTEXT_CHARS
from rag_sources.config import MISSING_SOURCE_HINT as _MISSING_HINT
from rag_sources.errors import RaglineError
from rag_sources.kinds import kind_filters

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn typed ragline errors into one clean message and their exit code."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RaglineError as exc:
            for line in str(exc).splitlines() or [type(exc).__name__]:
                click.secho("error: ", fg="red", bold=True, err=True, nl=False)
                click.echo(line, err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]


class Context:
    def __init__(self, config_path: str | None, command: str | None = None):
        self.config_path = config_path
        self.command = command
        self._config: RaglineConfig | None = None

    @property
    def config(self) -> RaglineConfig:
        if self._config is None:
            config = load_config(self.config_path)
            _check_paths_for(self.command, config)
            self._config = config
        return self._config


def kind_filter_options(command: F) -> F:
    """An option per registered kind filter (``--from``, ``--series``…), as repeatable
    values passed to the command by the filter's name."""
    for facet_filter in reversed(kind_filters()):
        command = click.option(
            facet_filter.option, facet_filter.name, multiple=True, help=facet_filter.help
        )(command)
    return command


def filter_options(command: F) -> F:
    """The search filters (``--source``, ``--tag``, ``--after``…, and each kind's), for
    ``search`` and ``ask``; the command builds them with ``search_filters``."""
    options = [
        click.option("--source", "sources", multiple=True, help="Only this source (repeatable)."),
        click.option(
            "--kind", "kinds", multiple=True, help="Only this kind of source (repeatable)."
        ),
        click.option(
            "--path", "path_prefix", help="Only paths starting with this (relative to the source)."
        ),
        click.option(
            "--tag",
            "tags",
            multiple=True,
            help="Only items with this tag (repeatable: all must match).",
        ),
        click.option(
            "--after",
            help="Only items dated on or after this (YYYY-MM-DD): each item's own date (a commit's, "
            "a message's Date, a feed entry's, a note's frontmatter or file-name date), else the "
            "file's modification time.",
        ),
        click.option("--before", help="Only items dated before this (YYYY-MM-DD), as for --after."),
        click.option(
            "--type",
            "types",
            multiple=True,
            help="Only this file type: pdf, md, docx…, a code file's language (python, or py), "
            "commit, email, entry (repeatable).",
        ),
        click.option(
            "--language",
            "languages",
            multiple=True,
            help="Only code in this language: python, go… or py, golang, c++ (repeatable).",
        ),
        click.option(
            "--symbol",
            "symbols",
            multiple=True,
            help="Only code defining this function, method or class: retry or Client.retry; a hit "
            "shows the one that matched (repeatable).",
        ),
        click.option(
            "--author",
            "authors",
            multiple=True,
            help="Only commits, messages (by sender), books or feed entries by this name or e-mail "
            "(repeatable).",
        ),
    ]
    command = kind_filter_options(command)
    for option in reversed(options):
        command = option(command)
    return command


def search_filters(values: dict[str, Any]) -> Any:
    """``SearchFilters`` from the values of ``filter_options`` (dates checked)."""
    from rag_serving.index.filters import parse_date
    from rag_serving.search import SearchFilters

    after, before = values.pop("after"), values.pop("before")
    return SearchFilters(
        after=parse_date(after, "--after") if after is not None else None,
        before=parse_date(before, "--before") if before is not None else None,
        **values,
    )


def _check_paths_for(command: str | None, config: RaglineConfig) -> None:
    """The file-system checks of the config that ``command`` needs (exit 2 on a
    problem), before any Dagster or server code runs. ``index`` checks the sources
    it indexes itself; search and status read what is indexed and check nothing."""
    from rag_serving.config import data_dir_problems, source_path_problems
    from rag_sources.errors import ConfigError

    if command == "ui":
        # A source folder that is missing (an unplugged disk) does not stop the UI:
        # the other sources stay fresh; a path that can never work does.
        problems = source_path_problems(config)
        missing = [line for line in problems if line.endswith(_MISSING_HINT)]
        lines = data_dir_problems(config) + [p for p in problems if p not in missing]
        if lines:
            raise ConfigError("\n".join(lines))
        for line in missing:
            click.secho("warning: ", fg="yellow", bold=True, err=True, nl=False)
            click.echo(line, err=True)
    elif command == "worker":
        # A worker writes the index; the sources it reads are checked by each run.
        lines = data_dir_problems(config)
        if lines:
            raise ConfigError("\n".join(lines))
    elif command == "mcp":
        # The server only reads the index (reindex runs go through Dagster, which
        # reports its own problems): a data_dir that is a file is the one mistake.
        lines = data_dir_problems(config, writable=False)
        if lines:
            raise ConfigError("\n".join(lines))


pass_context = click.make_pass_decorator(Context)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="RAGLINE_CONFIG",
    help="Config file (default: $RAGLINE_CONFIG, ./ragline.toml, ~/.config/ragline/ragline.toml).",
)
@click.version_option(package_name="ragline")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """ragline: a local-first personal knowledge index with hybrid search."""
    ctx.obj = Context(config_path, ctx.invoked_subcommand)


@cli.command()
@click.argument("path")
@click.option("--name", help="Source name (default: derived from the folder name).")
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the config (default: ./ragline.toml).",
)  # fmt: skip
@click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), help="Index location."
)
@click.option("--force", is_flag=True, help="Overwrite an existing config file.")
@click.option(
    "--kind", type=click.Choice(SOURCE_KINDS), help="Source kind (default: detected from PATH)."
)
@handle_errors
def init(
    path: str,
    name: str | None,
    output: Path | None,
    data_dir: Path | None,
    force: bool,
    kind: str | None,
) -> None:
    """Write a starter config with one source for PATH (its kind detected): a folder,
    an mbox or OPML file, or a feed's URL."""
    from rag_serving.config import (
        new_source_target,
        parse_config_file,
        source_name,
        starter_config,
    )
    from rag_sources.errors import ConfigError

    kind, reason, source = new_source_target(path, kind)
    target = (output or Path("ragline.toml")).expanduser().resolve()
    if target.exists() and not force:
        raise ConfigError(f"{target} already exists; use --force to overwrite it")
    data = (data_dir or target.parent / ".ragline").expanduser().resolve()
    text = starter_config(source, data, name or source_name(source), kind)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    parse_config_file(target)  # what we write must load
    click.echo(f"Source kind: {kind} ({reason})")
    click.echo(f"Wrote {target}\nNext: ragline --config {target} index")


@cli.command()
@click.argument("sources", nargs=-1)
@click.option(
    "--full", is_flag=True, help="Rebuild completely (vectors of unchanged text are reused)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@click.option(
    "--progress",
    type=click.Choice(["auto", "bar", "plain", "ndjson", "none"]),
    default="auto",
    show_default=True,
    help="auto: a bar on a terminal, else plain lines on stderr (none with --json); "
    "ndjson: one JSON event per line on stdout, for programs.",
)
@pass_context
@handle_errors
def index(ctx: Context, sources: tuple[str, ...], full: bool, as_json: bool, progress: str) -> None:
    """Index SOURCES (all configured sources when none is named) through Dagster.

    Exit code 0: every run succeeded (items that failed are counted in the output);
    1: a run failed (a step failed, or every item of a source failed); 2: nothing
    could run (the config, a source's folder, the index)."""
    from rag_serving.config import require_usable
    from ragline.index_command import run_index

    if as_json and progress == "ndjson":
        raise click.UsageError("--json and --progress ndjson both write to stdout; pick one")
    try:
        config = ctx.config
        names = [config.source(name).name for name in sources]
        require_usable(config, names or None)
        code = run_index(config, names, full, as_json, progress)
    except RaglineError as exc:
        exc.exit_code = 2  # raised before or outside any run: nothing was indexed
        raise
    sys.exit(code)


@cli.command()
@click.argument("query")
@click.option(
    "--k", "-k", type=click.IntRange(1, 1000), help="Number of hits (default from config)."
)
@filter_options
@click.option("--mode", type=click.Choice(["hybrid", "bm25", "vector"]), help="Retrieval mode.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--explain", is_flag=True, help="Show each hit's rank and score in every list.")
@click.option(
    "--rerank/--no-rerank",
    default=None,
    help="Re-score the top hits with the reranker of [search.rerank] (default: its `enabled`).",
)
@click.option(
    "--context",
    "context_chars",
    type=click.IntRange(1, MAX_CONTEXT_CHARS),
    metavar="CHARS",
    help="Grow each hit to its section (heading, page, function, message), CHARS in all.",
)
@click.option(
    "--all-sections",
    is_flag=True,
    help="Every matching chunk, several of one document too (default: its best one).",
)
@pass_context
@handle_errors
def search(
    ctx: Context,
    query: str,
    k: int | None,
    mode: str | None,
    as_json: bool,
    explain: bool,
    rerank: bool | None,
    context_chars: int | None,
    all_sections: bool,
    **filter_values: Any,
) -> None:
    """Search the index (hybrid vector + BM25 by default)."""
    from rag_serving.search import hybrid_search
    from ragline.output import print_json, render_search

    result = hybrid_search(
        ctx.config,
        query,
        k=k,
        filters=search_filters(filter_values),
        mode=mode,  # type: ignore[arg-type]
        rerank=rerank,
        context=context_chars,
        collapse=False if all_sections else None,
    )
    if as_json:
        print_json(result.as_json(with_explain=explain))
    else:
        render_search(result, explain)


@cli.command()
@click.argument("question")
@click.option(
    "--k", "-k", type=click.IntRange(1, 50), default=8, show_default=True,
    help="Hits to answer from.",
)  # fmt: skip
@filter_options
@click.option("--model", help="The [llm] model to ask (default: the config's).")
@click.option(
    "--context",
    "context_chars",
    type=click.IntRange(200, MAX_CONTEXT_CHARS),
    metavar="CHARS",
    help="Characters of excerpts to give the model (default: what fits its context window).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (no streaming).")
@pass_context
@handle_errors
def ask(
    ctx: Context,
    question: str,
    k: int,
    model: str | None,
    context_chars: int | None,
    as_json: bool,
    **filter_values: Any,
) -> None:
    """Answer a question from the index with the local model (Ollama), citing excerpts;
    every citation is checked against the excerpt it cites."""
    from ragline.ask_command import run_ask

    run_ask(ctx.config, question, k, search_filters(filter_values), model, context_chars, as_json)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@pass_context
@handle_errors
def status(ctx: Context, as_json: bool) -> None:
    """Per source: documents, chunks, last indexed, files with errors."""
    from rag_serving.status import index_status
    from ragline.output import print_json, render_status

    report = index_status(ctx.config)
    if as_json:
        print_json(report.as_json())
    else:
        render_status(report)


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=3000, show_default=True, type=int)
@pass_context
@handle_errors
def ui(ctx: Context, host: str, port: int) -> None:
    """Start the Dagster webserver and daemon for this project."""
    from ragline.ui_command import run_ui

    sys.exit(run_ui(ctx.config, host, port))


@cli.command()
@click.option("--name", help="The worker's Celery node name (default: ragline-PID@HOST).")
@click.option(
    "--loglevel",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
    default="INFO",
    show_default=True,
)
@click.option(
    "--threads",
    type=click.IntRange(1, 256),
    help="Threads for embedding (default: every core; with N workers on a host, cores/N).",
)
@pass_context
@handle_errors
def worker(ctx: Context, name: str | None, loglevel: str, threads: int | None) -> None:
    """Run one Celery worker for indexing steps ([dagster] executor = "celery")."""
    from ragline.worker_command import run_worker

    run_worker(ctx.config, name, loglevel.upper(), threads)


def _register_groups() -> None:
    from ragline import sources_command

    sources_command.register(cli, handle_errors, pass_context)
    from ragline import mcp_command

    mcp_command.register(cli, handle_errors, pass_context)
    from ragline import eval_command

    eval_command.register(cli, handle_errors, pass_context)
    from ragline import watch_command

    watch_command.register(cli, handle_errors, pass_context)
    from ragline import clip_command

    clip_command.register(cli, handle_errors, pass_context)


_register_groups()


def main() -> None:
    """Console-script entry point."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cli(prog_name="ragline")


if __name__ == "__main__":
    main()
