"""The five indexing assets, partitioned by source. Each writes to the index
through the typed resources and returns counts as metadata."""

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    MaterializeResult,
    asset,
)

from rag_assets import checks
from rag_assets.assets.metadata import materialize_result
from rag_assets.migrations import upgrade_index
from rag_assets.partitions import sources_partitions
from rag_assets.recovery import process_tags
from rag_assets.resources import EmbedderResource, IndexStoreResource, RaglineConfigResource
from rag_assets.sources import source_kind
from rag_assets.stages.chunk import chunk_source
from rag_assets.stages.embed import embed_source, target_generation
from rag_assets.stages.fulltext import sync_fulltext
from rag_assets.stages.parse import parse_source
from rag_assets.stages.scan import scan_source
from rag_serving.index.ann import ensure_search_indexes

FULL_REBUILD_TAG = "ragline/full"
# "deferred": the pass that does the costly work (OCR) the first pass left queued.
PASS_TAG = "ragline/pass"
WRITER_POOL = "ragline_writer"
GROUP = "indexing"


def _check_result(
    outcome: checks.CheckOutcome, severity: AssetCheckSeverity = AssetCheckSeverity.ERROR
) -> AssetCheckResult:
    return AssetCheckResult(
        check_name=outcome.name,
        passed=outcome.passed,
        severity=severity,
        description=outcome.description,
        metadata=outcome.metadata,
    )


def is_full_rebuild(context: AssetExecutionContext) -> bool:
    """A run tagged ``ragline/full=true`` (``ragline index --full``) or part of a
    backfill rebuilds its source completely."""
    tags = context.run.tags
    return tags.get(FULL_REBUILD_TAG) == "true" or "dagster/backfill" in tags


def is_deferred_pass(context: AssetExecutionContext) -> bool:
    """A run tagged ``ragline/pass=deferred`` does the work first passes queued (OCR)."""
    return context.run.tags.get(PASS_TAG) == "deferred"


@asset(partitions_def=sources_partitions, pool=WRITER_POOL, group_name=GROUP, kinds={"lancedb"})
def raw_files(
    context: AssetExecutionContext, settings: RaglineConfigResource, index_store: IndexStoreResource
) -> MaterializeResult:
    """The source's files: path, size, mtime and content hash (unchanged files cost a stat)."""
    # Record which process runs this run, so a killed run can be recognised later.
    context.instance.add_run_tags(context.run_id, process_tags())
    source = settings.source(context.partition_key)
    store = index_store.store()
    upgraded = upgrade_index(store)
    if upgraded:
        context.log.info(f"index upgraded in place: {upgraded}")
    result = scan_source(store, source_kind(source), full=is_full_rebuild(context))
    return materialize_result(result)


@asset(
    deps=[raw_files], partitions_def=sources_partitions, pool=WRITER_POOL, group_name=GROUP,
    kinds={"lancedb"},
    check_specs=[AssetCheckSpec(checks.ITEMS_INDEXED, asset="parsed_documents")],
)  # fmt: skip
def parsed_documents(
    context: AssetExecutionContext, settings: RaglineConfigResource, index_store: IndexStoreResource
) -> MaterializeResult:
    """Parsed documents (text with anchored sections, title, tags, links); broken items
    recorded and skipped; costly work (OCR) queued for a deferred pass."""
    source = settings.source(context.partition_key)
    store = index_store.store()
    result = parse_source(
        store,
        source_kind(source),
        full=is_full_rebuild(context),
        run_id=context.run_id,
        deferred_pass=is_deferred_pass(context),
    )
    for problem in result.problems:
        context.log.warning(f"{source.name}: {problem.path}: {problem.severity}: {problem.message}")
    outcome = checks.items_indexed(store, source.name)
    return materialize_result(result, [_check_result(outcome, AssetCheckSeverity.WARN)])


@asset(
    deps=[parsed_documents], partitions_def=sources_partitions, pool=WRITER_POOL,
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
    source = config.source(context.partition_key)
    result = chunk_source(
        index_store.store(), source_kind(source), config.chunking, embedder.embedder(),
        full=is_full_rebuild(context),
    )  # fmt: skip
    return materialize_result(result)


@asset(
    deps=[chunks], partitions_def=sources_partitions, pool=WRITER_POOL, group_name=GROUP,
    kinds={"lancedb"},
    check_specs=[
        AssetCheckSpec(checks.CHUNKS_HAVE_DOCUMENTS, asset="embeddings", blocking=True),
        AssetCheckSpec(checks.VECTORS_HAVE_RECORDED_DIMENSION, asset="embeddings", blocking=True),
        AssetCheckSpec(checks.ONE_EMBEDDER_FINGERPRINT, asset="embeddings", blocking=True),
    ],
)  # fmt: skip
def embeddings(
    context: AssetExecutionContext,
    settings: RaglineConfigResource,
    index_store: IndexStoreResource,
    embedder: EmbedderResource,
) -> MaterializeResult:
    """Vectors for every chunk, reused by text hash; published to the served table."""
    source = settings.source(context.partition_key)
    store, model = index_store.store(), embedder.embedder()
    result = embed_source(store, source, model, full=is_full_rebuild(context))
    generation = target_generation(store, model)
    # Scalar and vector indexes once the table is large enough; never fails the run.
    indexes = ensure_search_indexes(store, generation.table)
    if indexes["errors"] != "none":
        context.log.warning(
            f"{generation.table}: an index could not be built ({indexes['errors']}); "
            "search still works without it, only slower"
        )
    result.extra.update({f"search_index/{k}": v for k, v in indexes.items() if k != "table"})
    outcomes = [
        checks.chunks_have_documents(store, generation, source.name),
        checks.vectors_have_recorded_dimension(store, generation, source.name),
        checks.one_embedder_fingerprint(store, model.fingerprint),
    ]
    return materialize_result(result, [_check_result(o) for o in outcomes])


@asset(
    deps=[embeddings], partitions_def=sources_partitions, pool=WRITER_POOL, group_name=GROUP,
    kinds={"tantivy"},
    check_specs=[
        AssetCheckSpec(checks.TANTIVY_MATCHES_LANCEDB, asset="fulltext_index", blocking=True)
    ],
)  # fmt: skip
def fulltext_index(
    context: AssetExecutionContext,
    settings: RaglineConfigResource,
    index_store: IndexStoreResource,
    embedder: EmbedderResource,
) -> MaterializeResult:
    """The Tantivy BM25 index, kept equal to the LanceDB chunks of the source."""
    config = settings.load()
    source = config.source(context.partition_key)
    store, model = index_store.store(), embedder.embedder()
    result = sync_fulltext(store, source, model, context.run_id, [s.name for s in config.sources])
    generation = target_generation(store, model)
    outcome = checks.tantivy_matches_lancedb(store, generation, source.name)
    return materialize_result(result, [_check_result(outcome)])
