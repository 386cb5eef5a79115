"""``ragline eval``: retrieval quality on a BEIR-layout dataset, or (``--self``) on
the user's own index with queries built from it (rag_serving/evaluation/self_eval.py).

The corpus is written as one Markdown note per document into ``<work>/corpus``,
indexed through the normal pipeline (Dagster, LanceDB, Tantivy) into
``<work>/index`` with a generated ``<work>/ragline.toml``, and every judged query is
run through ``SearchEngine.search``. ``<work>`` is a temporary folder, or the
``--data-dir`` given, where the index is reused while the corpus and the index
settings stay the same (``<work>/eval-state.json`` records both).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rag_serving.config import CONFIG_ENV, RaglineConfig, parse_config_file
from rag_sources.errors import RaglineError

if TYPE_CHECKING:
    from rich.progress import Progress

    from rag_serving.evaluation.beir import BeirDataset, BeirDocument
    from rag_serving.search import SearchEngine

MODES = ("hybrid", "bm25", "vector")
RECALL_DEPTH = 100  # recall@100, and the number of documents ranked per query
MAX_CHUNK_DEPTH = 3200  # search depth (chunks) never grows past this
SOURCE_NAME = "eval"
STATE_FILE = "eval-state.json"
# Bump when the way documents become Markdown changes: an old index is then rebuilt.
RENDER_VERSION = 1


@dataclass(frozen=True)
class ModeScores:
    """Mean metrics of one retrieval mode over the evaluated queries."""

    mode: str
    ndcg: float
    recall: float
    mrr: float
    queries: int

    def as_json(self, k: int) -> dict[str, Any]:
        return {
            "mode": self.mode,
            f"ndcg@{k}": round(self.ndcg, 6),
            f"recall@{RECALL_DEPTH}": round(self.recall, 6),
            f"mrr@{k}": round(self.mrr, 6),
            "queries": self.queries,
        }


@dataclass(frozen=True)
class PreparedIndex:
    """An index of the dataset's corpus, ready to search."""

    config: RaglineConfig
    path_to_id: dict[str, str]  # note path (relative to the corpus folder) → corpus _id
    reused: bool
    indexed_chunks: int = 0
    skipped_documents: int = 0
    seconds: float = 0.0


# ---- the corpus as Markdown notes -------------------------------------------


def note_name(doc_id: str) -> str:
    """A safe, fixed-length file name for a corpus ``_id`` (its SHA-256, hex).

    Hashing keeps ids out of the note's title and path fields, so an id such as
    ``"5"`` never matches a query word."""
    return hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:32] + ".md"


def render_note(doc: BeirDocument) -> str:
    """The Markdown of one document: its title as frontmatter (so the note's title
    field is the real title, not the hashed file name) and as ``# {title}``, then the
    text, verbatim."""
    title = " ".join(doc.title.split())
    if title:
        body = f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\n---\n# {title}\n\n{doc.text}"
    else:
        # no heading: keep a leading ``---`` from being read as frontmatter
        body = "\n" + doc.text if doc.text.startswith("---") else doc.text
    return body if not body or body.endswith("\n") else body + "\n"


def write_corpus(corpus_dir: Path, documents: Sequence[BeirDocument]) -> dict[str, str]:
    """Write one note per document (rewriting only what differs, deleting notes of
    documents no longer in the corpus); return note name → corpus ``_id``."""
    corpus_dir.mkdir(parents=True, exist_ok=True)
    mapping: dict[str, str] = {}
    for doc in documents:
        name = note_name(doc.id)
        if name in mapping:
            raise RaglineError(f"corpus ids {mapping[name]!r} and {doc.id!r} hash alike")
        mapping[name] = doc.id
        data = render_note(doc).encode("utf-8")
        target = corpus_dir / name
        if not target.is_file() or target.read_bytes() != data:
            target.write_bytes(data)
    for stale in corpus_dir.glob("*.md"):
        if stale.name not in mapping:
            stale.unlink()
    return mapping


# ---- configuration -----------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are valid TOML basic strings
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def with_rerank(config: RaglineConfig, rerank: bool | None) -> RaglineConfig:
    """``config`` with reranking turned on or off (as it is for None)."""
    if rerank is None:
        return config
    settings = config.search.rerank.model_copy(update={"enabled": rerank})
    search = config.search.model_copy(update={"rerank": settings})
    return config.model_copy(update={"search": search})


def index_settings(base: RaglineConfig | None) -> dict[str, dict[str, Any]]:
    """The settings that shape the index (embedder, chunking): the given config's,
    or the defaults when no config was given."""
    config = base or RaglineConfig()
    # The backend that runs the model is not an index setting: both give the same
    # vectors (the ONNX export is checked against PyTorch when it is made).
    backends = {"query_backend", "document_backend"}
    return {
        "embedder": config.embedder.model_dump(mode="json", exclude_none=True, exclude=backends),
        "chunking": config.chunking.model_dump(mode="json", exclude_none=True),
    }


def write_eval_config(work: Path, base: RaglineConfig | None) -> RaglineConfig:
    """Write ``<work>/ragline.toml`` (one markdown source, ``eval``) and load it."""
    sections = dict(index_settings(base))
    sections["search"] = (base or RaglineConfig()).search.model_dump(mode="json", exclude_none=True)
    lines = [
        "# Written by `ragline eval`; rewritten on every run.",
        f"data_dir = {_toml_value(str(work / 'index'))}",
        "",
    ]
    for name, values in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
        lines.append("")
    lines += [
        "[[sources]]",
        f"name = {_toml_value(SOURCE_NAME)}",
        'kind = "markdown"',
        f"path = {_toml_value(str(work / 'corpus'))}",
        'include = ["*.md"]',
        "",
    ]
    path = work / "ragline.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return parse_config_file(path)


# ---- building or reusing the index -------------------------------------------


def _read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _check_work_dir(work: Path) -> None:
    """Refuse a non-empty folder that ragline eval did not create."""
    if not work.exists():
        return
    if not work.is_dir():
        raise click.BadParameter(f"{work} is not a folder", param_hint="--data-dir")
    ours = (work / STATE_FILE).exists() or (work / "corpus").is_dir()
    if not ours and any(work.iterdir()):
        raise click.BadParameter(
            f"{work} is not empty and was not made by `ragline eval`; "
            "give an empty or new folder (it holds the corpus notes and their index)",
            param_hint="--data-dir",
        )


@contextmanager
def _restored_config_env() -> Iterator[None]:
    """``index_sources`` points $RAGLINE_CONFIG at the eval config; undo that."""
    saved = os.environ.get(CONFIG_ENV)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(CONFIG_ENV, None)
        else:
            os.environ[CONFIG_ENV] = saved


def _fulltext_outdated(config: RaglineConfig) -> bool:
    """Whether the live full-text index was written by an older ragline (an index
    run then rebuilds it from the stored chunks, nothing re-embedded)."""
    from rag_serving.index.fulltext import is_outdated
    from rag_serving.index.layout import IndexLayout
    from rag_serving.index.manifest import read_manifest

    layout = IndexLayout(config.data_dir, config.index_uri)
    active = read_manifest(layout.manifest_path, missing_ok=True, upgrading=True).active
    return active is not None and is_outdated(layout.fulltext_dir(active.key))


def prepare_index(
    dataset: BeirDataset,
    work: Path,
    base: RaglineConfig | None,
    on_progress: Callable[[str, str, int, int], None] | None = None,
) -> PreparedIndex:
    """Index the corpus under ``work``, or reuse the index already there when it
    was built from the same corpus with the same index settings."""
    _check_work_dir(work)
    work.mkdir(parents=True, exist_ok=True)
    config = write_eval_config(work, base)
    state_path = work / STATE_FILE
    wanted = {
        "render_version": RENDER_VERSION,
        "corpus_sha256": dataset.corpus_sha256,
        "documents": len(dataset.corpus),
        "index_settings": index_settings(base),
    }
    state = _read_state(state_path)
    if (
        state is not None
        and all(state.get(key) == value for key, value in wanted.items())
        and isinstance(state.get("notes"), dict)
        and (config.data_dir / "index.json").is_file()
        and not _fulltext_outdated(config)
    ):
        return PreparedIndex(config, dict(state["notes"]), reused=True)

    state_path.unlink(missing_ok=True)  # an interrupted build must not look complete
    mapping = write_corpus(work / "corpus", dataset.corpus)
    from ragline.indexing import index_sources

    started = time.perf_counter()
    with _restored_config_env():
        outcomes = index_sources(config, [SOURCE_NAME], full=False, on_progress=on_progress)
    failed = [o for o in outcomes if not o.success]
    if failed:
        raise RaglineError(f"indexing the corpus failed: {failed[0].error}")
    state_path.write_text(json.dumps({**wanted, "notes": mapping}), encoding="utf-8")
    metadata = outcomes[0].metadata
    return PreparedIndex(
        config,
        mapping,
        reused=False,
        indexed_chunks=int(metadata.get("embeddings", {}).get("dagster/row_count", 0)),
        skipped_documents=int(metadata.get("parsed_documents", {}).get("skipped", 0)),
        seconds=time.perf_counter() - started,
    )


# ---- querying and scoring ----------------------------------------------------


def rank_documents(
    engine: SearchEngine, query: str, mode: str, path_to_id: dict[str, str]
) -> list[str]:
    """Corpus ids of the best ``RECALL_DEPTH`` documents for ``query``, best first.

    Chunks collapse to their document's best rank. The search asks for 100 chunks
    and doubles that while fewer than 100 distinct documents came back and the
    index holds more."""
    if not query.strip():
        return []
    depth = RECALL_DEPTH
    while True:
        hits = engine.search(query, k=depth, mode=mode).hits  # type: ignore[arg-type]
        ranking = list(dict.fromkeys(path_to_id[h.path] for h in hits if h.path in path_to_id))
        if len(ranking) >= RECALL_DEPTH or len(hits) < depth or depth >= MAX_CHUNK_DEPTH:
            return ranking[:RECALL_DEPTH]
        depth *= 2


def evaluate(
    engine: SearchEngine,
    dataset: BeirDataset,
    query_ids: Sequence[str],
    modes: Sequence[str],
    k: int,
    path_to_id: dict[str, str],
    progress: Progress | None = None,
) -> list[ModeScores]:
    """Run every query in every mode and average nDCG@k, recall@100 and MRR@k."""
    from rag_serving.evaluation.metrics import mean, mrr_at_k, ndcg_at_k, recall_at_k

    results = []
    for mode in modes:
        task = progress.add_task(f"querying ({mode})", total=len(query_ids)) if progress else None
        ndcg, recall, mrr = [], [], []
        for query_id in query_ids:
            qrels = dataset.qrels[query_id]
            ranking = rank_documents(engine, dataset.queries[query_id], mode, path_to_id)
            ndcg.append(ndcg_at_k(ranking, qrels, k))
            recall.append(recall_at_k(ranking, qrels, RECALL_DEPTH))
            mrr.append(mrr_at_k(ranking, qrels, k))
            if progress is not None and task is not None:
                progress.advance(task)
        results.append(ModeScores(mode, mean(ndcg), mean(recall), mean(mrr), len(query_ids)))
    return results


# ---- the command -------------------------------------------------------------


def run_eval(
    dataset_dir: Path,
    split: str | None,
    modes: Sequence[str],
    k: int,
    as_json: bool,
    data_dir: Path | None,
    limit_queries: int | None,
    base: RaglineConfig | None,
) -> None:
    """Load, index (or reuse), query and report; see the module docstring."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Table

    from rag_serving.evaluation.beir import load_beir
    from rag_serving.search import SearchEngine
    from ragline.index_command import STAGES
    from ragline.output import console, err_console, print_json

    dataset = load_beir(dataset_dir, split)
    judged = dataset.judged_queries()
    skipped = len(dataset.queries) - len(judged)
    orphans = dataset.qrels_without_query()
    query_ids = judged[:limit_queries] if limit_queries else judged
    if not query_ids:
        raise RaglineError(
            f"{dataset.root}: no query in queries.jsonl has judgements in qrels/{dataset.split}.tsv"
        )

    def note(message: str) -> None:
        err_console.print(message, markup=False, highlight=False, soft_wrap=True)

    note(
        f"{dataset.root.resolve().name} ({dataset.split}): {len(dataset.corpus)} documents, "
        f"{len(query_ids)} queries evaluated, {skipped} skipped (no qrels in the split)"
        + (f", {len(judged) - len(query_ids)} left out by --limit-queries" if limit_queries else "")
        + (f"; {len(orphans)} judged queries are not in queries.jsonl" if orphans else "")
    )

    def make_progress() -> Progress:
        return Progress(
            TextColumn("{task.description:<24}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            disable=not err_console.is_terminal,
        )

    work = (
        data_dir.expanduser().resolve()
        if data_dir
        else Path(tempfile.mkdtemp(prefix="ragline-eval-"))
    )
    try:
        indexing = make_progress()
        tasks: dict[str, Any] = {}

        def on_progress(source: str, stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = indexing.add_task(STAGES.get(stage, stage), total=max(total, 1))
            indexing.update(tasks[stage], completed=done, total=max(total, 1))

        with indexing:
            prepared = prepare_index(dataset, work, base, on_progress)
        if prepared.reused:
            note(f"reused index in {work} (same corpus and index settings)")
        else:
            note(
                f"indexed {len(dataset.corpus)} documents ({prepared.skipped_documents} skipped "
                f"as empty) into {prepared.indexed_chunks} chunks in {prepared.seconds:.1f}s"
            )
        engine = SearchEngine(prepared.config, read_consistency_s=None)
        with make_progress() as querying:
            scores = evaluate(engine, dataset, query_ids, modes, k, prepared.path_to_id, querying)
    finally:
        if data_dir is None:
            shutil.rmtree(work, ignore_errors=True)

    if as_json:
        print_json([s.as_json(k) for s in scores])
        return
    table = Table(title=f"{dataset.root.resolve().name} ({dataset.split})", show_edge=False)
    for column in ("mode", f"nDCG@{k}", f"recall@{RECALL_DEPTH}", f"MRR@{k}", "queries"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for s in scores:
        table.add_row(s.mode, f"{s.ndcg:.4f}", f"{s.recall:.4f}", f"{s.mrr:.4f}", str(s.queries))
    console.print(table)


# ---- ragline eval --self -----------------------------------------------------


def parse_modes(value: str | None, default: Sequence[str]) -> list[str]:
    """``--modes hybrid,bm25`` as a list (``default`` when not given)."""
    if value is None:
        return list(default)
    modes = [m.strip() for m in value.split(",") if m.strip()]
    for mode in modes:
        if mode not in MODES:
            raise click.BadParameter(
                f"unknown mode {mode!r}; give a comma-separated list of {', '.join(MODES)}",
                param_hint="--modes",
            )
    if not modes:
        raise click.BadParameter("give at least one mode", param_hint="--modes")
    return list(dict.fromkeys(modes))


def _signed(value: float | None) -> str:
    if value is None:
        return ""
    return "±0" if abs(value) < 0.00005 else f"{value:+.4f}"


def run_self_eval(
    config: RaglineConfig,
    sources: Sequence[str],
    modes: Sequence[str],
    limit: int | None,
    rebuild: bool,
    as_json: bool,
) -> None:
    """Evaluate the index on queries built from it; print a table per split."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    from rag_serving.evaluation.self_eval import QUERY_TYPES, K, self_evaluate
    from rag_serving.text import printable
    from ragline.output import console, err_console, print_json

    progress = Progress(
        TextColumn("{task.description:<24}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    tasks: dict[str, Any] = {}
    total = [0]

    def on_total(count: int) -> None:
        total[0] = count

    def on_query(mode: str) -> None:
        if mode not in tasks:
            tasks[mode] = progress.add_task(f"querying ({mode})", total=total[0])
        progress.advance(tasks[mode])

    with progress:
        report = self_evaluate(config, sources, modes, limit, rebuild, on_query, on_total)
    if as_json:
        print_json(report.as_json())
        return

    def note(message: str) -> None:
        err_console.print(message, markup=False, highlight=False, soft_wrap=True)

    data = report.as_json()["query_set"]
    types = ", ".join(f"{data['by_type'].get(t, 0)} {t}" for t in QUERY_TYPES)
    origin = "built now" if report.built else f"stored {report.query_set.created}"
    note(
        f"{data['queries']} queries ({types}) from {', '.join(map(printable, report.sources))}; "
        f"{data['heldout']} held out, {data['tuning']} for tuning; query set {origin} "
        f"({report.path})"
        + (
            f"; {report.dropped} dropped (their target is no longer indexed)"
            if report.dropped
            else ""
        )
        + (f"; --limit {limit} per type" if limit else "")
    )
    if report.missing_sources:
        note(
            f"not in the stored query set: {', '.join(map(printable, report.missing_sources))} "
            "(--rebuild-queries builds a set that covers them)"
        )
    for split, title in (("heldout", "held-out set"), ("tuning", "tuning set")):
        table = Table(title=f"{title} ({data[split]} queries)", show_edge=False)
        columns = ["mode", f"MRR@{K}", "Δ", f"hit@{K}", "Δ"]
        columns += [f"{t} hit@{K}" for t in QUERY_TYPES if data["by_type"].get(t)]
        for column in columns:
            table.add_column(column, justify="left" if column == "mode" else "right")
        for result in report.results:
            scores = result.splits[split]
            change = (report.delta.get(result.mode) or {}).get(split) or {}
            row = [
                result.mode,
                f"{scores.mrr:.4f}",
                _signed(change.get(f"mrr@{K}")),
                f"{scores.hit:.4f}",
                _signed(change.get(f"hit@{K}")),
            ]
            by_type = result.by_type[split]
            row += [
                f"{by_type[t].hit:.4f}" if t in by_type else "-"
                for t in QUERY_TYPES
                if data["by_type"].get(t)
            ]
            table.add_row(*row)
        console.print(table)
    if report.previous is None:
        note(
            "no earlier run on this query set (with these sources and --limit): "
            "the next run shows the change (Δ) since this one"
        )
    else:
        changed = "; ".join(report.changes) if report.changes else "no setting changed"
        note(f"Δ since the run of {report.previous.get('at')}: {changed}")
    note(f"took {report.seconds:.1f}s")


def register(cli: click.Group, handle_errors: Callable[..., Any], pass_context: Any) -> None:
    """Add the ``eval`` command to ``cli``."""

    @cli.command("eval")
    @click.argument("targets", nargs=-1, metavar="DATASET_DIR | --self [SOURCES]...")
    @click.option(
        "--self", "self_eval", is_flag=True,
        help="Evaluate the index of the config on queries built from it (links, headings, "
        "distinctive fragments); SOURCES limits them (default: every indexed source).",
    )  # fmt: skip
    @click.option(
        "--modes", help="Comma-separated modes to evaluate (default: hybrid,bm25,vector with "
        "--self; else --mode)."
    )  # fmt: skip
    @click.option(
        "--limit", type=click.IntRange(min=1),
        help="--self: evaluate at most N queries of each type.",
    )  # fmt: skip
    @click.option(
        "--rebuild-queries", is_flag=True,
        help="--self: build a new query set instead of reusing the stored one.",
    )  # fmt: skip
    @click.option(
        "--split", help="Qrels split (qrels/SPLIT.tsv; default: test, or the only split)."
    )
    @click.option(
        "--mode", type=click.Choice([*MODES, "all"]),
        help="Retrieval mode to evaluate (all: each of hybrid, bm25, vector; default: "
        "hybrid, and all with --self).",
    )  # fmt: skip
    @click.option(
        "--k", "k", type=click.IntRange(1, RECALL_DEPTH), default=10, show_default=True,
        help="Cut-off of nDCG and MRR (recall is always @100; --self: always 10).",
    )  # fmt: skip
    @click.option(
        "--json", "as_json", is_flag=True,
        help="Print JSON: a list, one object per mode (--self: one object).",
    )  # fmt: skip
    @click.option(
        "--data-dir", type=click.Path(file_okay=False, path_type=Path),
        help="Keep the corpus notes and their index here and reuse them on the next run "
        "(default: a temporary folder, deleted afterwards).",
    )  # fmt: skip
    @click.option(
        "--limit-queries", type=click.IntRange(min=1),
        help="Evaluate only the first N judged queries.",
    )  # fmt: skip
    @click.option(
        "--rerank/--no-rerank", default=None,
        help="Rerank every query with [search.rerank] of the config (default: its `enabled`).",
    )  # fmt: skip
    @pass_context
    @handle_errors
    def eval_command(
        ctx: Any,
        targets: tuple[str, ...],
        self_eval: bool,
        modes: str | None,
        limit: int | None,
        rebuild_queries: bool,
        split: str | None,
        mode: str | None,
        k: int,
        as_json: bool,
        data_dir: Path | None,
        limit_queries: int | None,
        rerank: bool | None,
    ) -> None:
        """Measure retrieval quality on a BEIR-layout DATASET_DIR (nDCG, recall, MRR),
        or with --self on your own index (MRR@10, hit@10, and the change since the
        last run).

        A dataset's corpus is indexed through the normal pipeline; embedder, chunking
        and search settings come from --config when one is given, else the defaults.
        --self builds known-item queries from the index of the config and keeps them
        in <data_dir>/eval/, so later runs reuse the same held-out set."""
        if self_eval:
            for name, given in (
                ("--split", split),
                ("--data-dir", data_dir),
                ("--limit-queries", limit_queries),
            ):
                if given is not None:
                    raise click.UsageError(f"{name} is for a dataset; not with --self")
            chosen = parse_modes(modes, MODES if mode in (None, "all") else [mode])
            config = with_rerank(ctx.config, rerank)
            run_self_eval(config, targets, chosen, limit, rebuild_queries, as_json)
            return
        if len(targets) != 1:
            raise click.UsageError(
                "give one DATASET_DIR (a BEIR-layout folder), or --self to evaluate your index"
            )
        if limit is not None or rebuild_queries:
            raise click.UsageError("--limit and --rebuild-queries go with --self")
        modes_list = parse_modes(modes, MODES if mode == "all" else [mode or "hybrid"])
        base = ctx.config if ctx.config_path else None
        if rerank is not None:
            base = with_rerank(base or RaglineConfig(), rerank)
        run_eval(Path(targets[0]), split, modes_list, k, as_json, data_dir, limit_queries, base)
