"""The five indexing assets, partitioned by source. Each writes to the index
through the typed resources and returns counts as metadata."""

import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    Failure,
    MaterializeResult,
    MetadataValue,
    OpExecutionContext,
    asset,
)

from rag_assets import checks
from rag_assets.assets.metadata import materialize_result
from rag_assets.migrations import upgrade_index
from rag_assets.partitions import sources_partitions
from rag_assets.progress import report_problems, report_start
from rag_assets.recovery import claimed_step
from rag_assets.resources import EmbedderResource, IndexStoreResource, RaglineConfigResource
from rag_assets.run_failures import NothingIndexed, readable_failure
from rag_assets.sources import SourceKind, source_kind
from rag_assets.stages.autotag import DocumentTagger
from rag_assets.stages.chunk import chunk_source
from rag_assets.stages.embed import target_generation
from rag_assets.stages.fulltext import sync_fulltext
from rag_assets.stages.parse import parse_source
from rag_assets.stages.scan import scan_source
from rag_assets.writer_turn import wait_for_source_turn
from rag_serving.config import RaglineConfig
from rag_serving.index.manifest import read_manifest
from rag_serving.index.store import IndexStore
from rag_sources.config import FileSourceConfig
from rag_sources.errors import ConfigError
from rag_sources.where import sql_string

FULL_REBUILD_TAG = "ragline/full"
# "deferred": the pass that does the costly work (OCR) the first pass left queued.
PASS_TAG = "ragline/pass"
LAUNCHED_BY_TAG = "ragline/launched_by"  # cli, mcp, sensor, sensor-retry, reconcile; none: the UI
# Set by `ragline watch`: the paths its file-system events named (a JSON list). The
# scan then lists only those; without it (sensor, CLI, UI) the whole source.
CHANGED_PATHS_TAG = "ragline/changed_paths"
# Set by such a scan: the doc ids it touched (a JSON list); the later stages of the
# run do only their work. Above SCOPE_LIMIT they reconcile the whole source.
SCOPE_TAG = "ragline/scope"
SCOPE_LIMIT = 1000
# Runs a person asked for (a UI run carries no launched_by tag).
ON_DEMAND_LAUNCHERS = ("cli", "mcp")
GROUP = "indexing"
# The steps of a plain asset, and the ops of a graph-backed one (embeddings).
StepContext = AssetExecutionContext | OpExecutionContext
LOCATION_CHARS = 200  # of a source's location shown in metadata (a list of feeds)


def check_spec(name: str, asset: str, blocking: bool = False) -> AssetCheckSpec:
    """A check evaluated per source: the UI shows each partition's own latest result."""
    with warnings.catch_warnings():
        # Partitioned asset checks are a preview feature of Dagster 1.13 (a warning only).
        warnings.simplefilter("ignore")
        return AssetCheckSpec(
            name, asset=asset, blocking=blocking, description=checks.DESCRIPTIONS[name],
            partitions_def=sources_partitions,
        )  # fmt: skip


def configured_source(context: StepContext, config: RaglineConfig) -> FileSourceConfig:
    """The source of this run's partition; a partition that names no configured source
    (added by hand in the UI) fails with one line saying what to do."""
    name = context.partition_key
    try:
        return config.source(name)
    except ConfigError as exc:
        raise Failure(
            description=(
                f"{exc}: partition {name!r} is not a source in {config.config_path}; add a "
                f"[[sources]] entry named {name!r}, or leave it: the source_partitions sensor "
                "removes partitions that no configured source has and that hold no data"
            ),
            allow_retries=False,
        ) from None


@contextmanager
def running_step(context: StepContext) -> Iterator[None]:
    """Record which process runs the step until it ends (a killed one is recognised
    later; other hosts hear its heartbeat), after waiting until no run of this source
    that started earlier is still going (see writer_turn)."""
    step = context.get_step_execution_context().step.key
    with claimed_step(context.instance, context.run_id, step):
        wait_for_source_turn(context.instance, context.run_id, context.log)
        yield


def check_result(
    outcome: checks.CheckOutcome, severity: AssetCheckSeverity = AssetCheckSeverity.ERROR
) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=outcome.name,
        passed=outcome.passed,
        severity=severity,
        description=outcome.description,
        metadata=outcome.metadata,
    )


def is_full_rebuild(context: StepContext) -> bool:
    """A run tagged ``ragline/full=true`` (``ragline index --full``) or part of a
    backfill rebuilds its source completely."""
    tags = context.run.tags
    return tags.get(FULL_REBUILD_TAG) == "true" or "dagster/backfill" in tags


def is_deferred_pass(context: StepContext) -> bool:
    """A run tagged ``ragline/pass=deferred`` does the work first passes queued (OCR)."""
    return context.run.tags.get(PASS_TAG) == "deferred"


def changed_paths(context: StepContext) -> list[Path] | None:
    """The paths the run's file-system events named (``CHANGED_PATHS_TAG``); None for
    a run that reconciles the whole source."""
    raw = context.run.tags.get(CHANGED_PATHS_TAG)
    if raw is None or is_full_rebuild(context) or is_deferred_pass(context):
        return None
    try:
        paths = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        return None
    return [Path(p) for p in paths]


def _complete_in_target(
    store: IndexStore, source: FileSourceConfig, embedder: EmbedderResource
) -> bool:
    """Whether the source's last full run put it whole into the generation this run
    writes to: only then may the later stages touch just the changed documents (a
    generation being built for a new embedder is filled, and switched to, by runs of
    the whole source)."""
    manifest = read_manifest(store.layout.manifest_path, missing_ok=True)
    target = manifest.target_for(embedder.embedder().fingerprint)
    if target not in (manifest.active, manifest.building):
        return False
    where = f"source = {sql_string(source.name)}"
    states = store.read("source_state", where=where, columns=["generation"]).to_pylist()
    return bool(states) and states[0]["generation"] == target.key


def run_scope(context: StepContext) -> set[str] | None:
    """The doc ids this run's scan touched (``SCOPE_TAG``); None: the whole source."""
    if is_full_rebuild(context) or is_deferred_pass(context):
        return None
    run = context.instance.get_run_by_id(context.run_id)
    raw = None if run is None else run.tags.get(SCOPE_TAG)
    return None if raw is None else set(json.loads(raw))


def source_metadata(source: FileSourceConfig, kind: SourceKind) -> dict[str, object]:
    """What the partition indexes: the source's kind and its folder or file; a source
    without one (feeds) shows where its items come from instead (its feeds' URLs, its
    OPML file's name)."""
    metadata: dict[str, object] = {"source_kind": getattr(source, "kind", "files")}
    if source.path is not None:
        metadata["source_path"] = MetadataValue.path(str(source.path))
    else:
        location = kind.location
        if len(location) > LOCATION_CHARS:
            location = location[: LOCATION_CHARS - 1] + "…"
        metadata["source_location"] = location or "-"
    return metadata


@asset(partitions_def=sources_partitions, group_name=GROUP, kinds={"lancedb"})
def raw_files(
    context: AssetExecutionContext,
    settings: RaglineConfigResource,
    index_store: IndexStoreResource,
    embedder: EmbedderResource,
) -> MaterializeResult:
    """The source's files: path, size, mtime and content hash (unchanged files cost a stat)."""
    config = settings.load()
    source = configured_source(context, config)
    with running_step(context), readable_failure(source.name, "raw_files"):
        store = index_store.store()
        with store.writing():
            upgraded = upgrade_index(store, {s.name: s.language for s in config.sources})
        if upgraded:
            context.log.info(f"index upgraded in place: {upgraded}")
        kind = source_kind(source, config.data_dir, config.index_uri)
        # Asked for by a person (CLI, UI, MCP) or a full rebuild: a kind that polls on a
        # schedule (feeds) checks everything now, not only what is due.
        launcher = context.run.tags.get(LAUNCHED_BY_TAG)
        kind.on_demand = (
            is_full_rebuild(context) or launcher is None or launcher in ON_DEMAND_LAUNCHERS
        )
        report_start(source.name, "scan")
        full, changed = is_full_rebuild(context), changed_paths(context)
        result = scan_source(store, kind, full=full, changed=changed)
        extra = source_metadata(source, kind)
        if result.scope is not None:
            extra["scope"] = f"{len(result.scope)} item(s) at the changed paths"
            if len(result.scope) <= SCOPE_LIMIT and _complete_in_target(store, source, embedder):
                context.instance.add_run_tags(context.run_id, {SCOPE_TAG: json.dumps(result.scope)})
        return materialize_result(result, extra=extra)


@asset(
    deps=[raw_files], partitions_def=sources_partitions, group_name=GROUP,
    kinds={"lancedb"}, check_specs=[check_spec(checks.ITEMS_INDEXED, "parsed_documents")],
)  # fmt: skip
def parsed_documents(
    context: AssetExecutionContext, settings: RaglineConfigResource, index_store: IndexStoreResource
) -> MaterializeResult:
    """Parsed documents (text with anchored sections, title, tags, links); broken items
    recorded and skipped; costly work (OCR) queued for a deferred pass. Beside the
    run's own counts, the problems standing now (``problems_standing`` …)."""
    config = settings.load()
    source = configured_source(context, config)
    with running_step(context), readable_failure(source.name, "parsed_documents"):
        store = index_store.store()
        kind = source_kind(source, config.data_dir, config.index_uri)
        report_start(source.name, "parse")
        result = parse_source(
            store,
            kind,
            full=is_full_rebuild(context),
            run_id=context.run_id,
            deferred_pass=is_deferred_pass(context),
            only=run_scope(context),
            tagger=DocumentTagger.for_source(store, source, config.llm),
        )
        if "auto-tags skipped" in str(result.extra.get("auto_tags", "")):
            context.log.warning(f"{source.name}: {result.extra['auto_tags']}")
        found = [(p.path, p.severity, p.message) for p in result.problems]
        report_problems(source.name, found)
        # One summary: an event per problem costs seconds per thousand items (a committed
        # node_modules/ of 100,000 files spent minutes writing them to the event log).
        summary = checks.problems_summary(source.name, found)
        if summary is not None:
            context.log.warning(summary)
        # Evaluated on every run from the source's recorded problems, so the check shows
        # the source's current problems even when this run parsed none of the broken items;
        # the metadata shows them too, next to this run's own counts.
        outcome = checks.items_indexed(store, source.name)
        standing = checks.standing_problems(store, source.name)
        return materialize_result(
            result, [check_result(outcome, AssetCheckSeverity.WARN)],
            extra={**standing.metadata(), **source_metadata(source, kind)},
        )  # fmt: skip


@asset(
    deps=[parsed_documents], partitions_def=sources_partitions,
    group_name=GROUP, kinds={"lancedb"},
)  # fmt: skip
def chunks(
    context: AssetExecutionContext,
    settings: RaglineConfigResource,
    index_store: IndexStoreResource,
    embedder: EmbedderResource,
) -> MaterializeResult:
    """Heading-aware chunks sized with the embedder's own tokenizer."""
    config = settings.load()
    source = configured_source(context, config)
    with running_step(context), readable_failure(source.name, "chunks"):
        kind = source_kind(source, config.data_dir, config.index_uri)
        report_start(source.name, "chunk")
        result = chunk_source(
            index_store.store(), kind, config.chunking, embedder.embedder(),
            full=is_full_rebuild(context), only=run_scope(context),
        )  # fmt: skip
        return materialize_result(result, extra=source_metadata(source, kind))


@asset(
    deps=[AssetKey("embeddings")], partitions_def=sources_partitions, group_name=GROUP,
    kinds={"tantivy"},
    check_specs=[check_spec(checks.TANTIVY_MATCHES_LANCEDB, "fulltext_index", blocking=True)],
)  # fmt: skip
def fulltext_index(
    context: AssetExecutionContext,
    settings: RaglineConfigResource,
    index_store: IndexStoreResource,
    embedder: EmbedderResource,
) -> Iterator[MaterializeResult | AssetCheckResult]:
    """The Tantivy BM25 index, kept equal to the LanceDB chunks of the source.

    The last step: a source none of whose items is indexed because they failed ends
    here as a failed run (``NothingIndexed``), once every stage has brought the index
    in line with what this run found (the check is still reported)."""
    config = settings.load()
    source = configured_source(context, config)
    with running_step(context), readable_failure(source.name, "fulltext_index"):
        store, model = index_store.store(), embedder.embedder()
        only = run_scope(context)
        configured = [s.name for s in config.sources]
        report_start(source.name, "fulltext")
        result = sync_fulltext(store, source, model, context.run_id, configured, only=only)
        generation = target_generation(store, model)
        outcome = checks.tantivy_matches_lancedb(store, generation, source.name, only)
        standing = checks.standing_problems(store, source.name)
        kind = source_kind(source, config.data_dir, config.index_uri)
        extra = {**source_metadata(source, kind), "embedder": model.fingerprint.describe()}
        result.extra.pop("generation", None)
        if result.extra.pop("promoted_generation", None):
            extra["search_switched_to"] = model.fingerprint.describe()
    if standing.nothing_indexed:
        yield check_result(outcome)
        raise NothingIndexed(
            description=standing.nothing_indexed_message(),
            metadata={**standing.metadata(), "items": standing.items, "indexed": 0},
            allow_retries=False,
        )
    yield materialize_result(result, [check_result(outcome)], extra=extra)
