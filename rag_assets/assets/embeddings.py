"""The ``embeddings`` asset: vectors for every chunk, made in one step or, for a big
source whose steps run apart (``multiprocess`` or ``celery``), in several steps at
once — each embeds one range of the source's documents and commits as it goes
(commits take turns through the index's commit lock), then one step builds the
search indexes and reports counts and checks."""

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetIn,
    DynamicOut,
    DynamicOutput,
    In,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    graph_asset,
    op,
)

from rag_assets import checks
from rag_assets.assets.indexing import (
    GROUP,
    check_result,
    check_spec,
    configured_source,
    is_full_rebuild,
    run_scope,
    running_step,
    source_metadata,
)
from rag_assets.assets.metadata import materialize_result
from rag_assets.executors import share_cores
from rag_assets.partitions import sources_partitions
from rag_assets.progress import report_start
from rag_assets.resources import EmbedderResource, IndexStoreResource, RaglineConfigResource
from rag_assets.run_failures import readable_failure
from rag_assets.run_values import RUN_VALUES
from rag_assets.sources import source_kind
from rag_assets.stages.embed import DocRange, embed_source, shard_ranges, target_generation
from rag_assets.stages.result import StageResult
from rag_serving.index.ann import ensure_search_indexes
from rag_sources.where import sql_string

STAGE = "embeddings"
CHECK_SPECS = [
    check_spec(checks.CHUNKS_HAVE_DOCUMENTS, STAGE, blocking=True),
    check_spec(checks.VECTORS_HAVE_RECORDED_DIMENSION, STAGE, blocking=True),
    check_spec(checks.ONE_EMBEDDER_FINGERPRINT, STAGE, blocking=True),
]
_CHECK_OUTS = {spec.get_python_identifier(): spec for spec in CHECK_SPECS}


@op(ins={"after": In(Nothing)}, out=DynamicOut(dict, io_manager_key=RUN_VALUES))
def plan_embedding(
    context: OpExecutionContext,
    settings: RaglineConfigResource,
    index_store: IndexStoreResource,
    embedder: EmbedderResource,
) -> Iterator[DynamicOutput[dict[str, Any]]]:
    """Split the source's embedding into ranges of documents with about as many chunks
    to embed each: one part unless steps run apart and there is enough to embed."""
    config = settings.load()
    source = configured_source(context, config)
    steps = config.dagster
    parts = 1 if steps.executor == "in_process" else steps.embedding_steps
    with running_step(context), readable_failure(source.name, STAGE):
        ranges = shard_ranges(
            index_store.store(), source, embedder.embedder(), full=is_full_rebuild(context),
            parts=parts, min_chunks=steps.embedding_step_min_chunks, only=run_scope(context),
        )  # fmt: skip
    if len(ranges) > 1:
        context.log.info(f"{source.name}: embedding in {len(ranges)} steps at once")
    for number, part in enumerate(ranges, start=1):
        value = {"start": part.start, "end": part.end, "parts": len(ranges)}
        yield DynamicOutput(value, mapping_key=f"part{number}")


@op(out=Out(dict, io_manager_key=RUN_VALUES))
def embed_part(
    context: OpExecutionContext,
    part: dict[str, Any],
    settings: RaglineConfigResource,
    index_store: IndexStoreResource,
    embedder: EmbedderResource,
) -> dict[str, Any]:
    """Embed one range of the source's documents and publish it, a few whole
    documents per commit. Returns its counts."""
    config = settings.load()
    source = configured_source(context, config)
    doc_range = DocRange(part["start"], part["end"])
    if part["parts"] > 1 and config.dagster.executor == "multiprocess":
        share_cores(part["parts"] * config.dagster.max_concurrent_runs)
    with running_step(context), readable_failure(source.name, STAGE):
        report_start(source.name, "embed")
        result = embed_source(
            index_store.store(), source, embedder.embedder(), full=is_full_rebuild(context),
            only=run_scope(context), doc_range=doc_range,
        )  # fmt: skip
    if part["parts"] > 1:
        context.log.info(f"{source.name}, {doc_range.describe()}: {result.counts()}")
    return {"counts": result.counts(), "extra": dict(result.extra)}


@op(
    ins={"parts": In(list)},
    out={"result": Out(Nothing), **{name: Out(Nothing) for name in _CHECK_OUTS}},
)
def publish_embeddings(
    context: OpExecutionContext,
    parts: list[dict[str, Any]],
    settings: RaglineConfigResource,
    index_store: IndexStoreResource,
    embedder: EmbedderResource,
) -> Iterator[Output[None] | AssetCheckResult]:
    """Build the table's search indexes when it is large enough, add up the parts'
    counts and evaluate the asset's checks."""
    config = settings.load()
    source = configured_source(context, config)
    with running_step(context), readable_failure(source.name, STAGE):
        store, model = index_store.store(), embedder.embedder()
        generation = target_generation(store, model)
        # They cover the whole table (every source): to the log, not to this source's
        # metadata; never a failed run (search works without them, only slower).
        with store.writing(generation.table):
            indexes = ensure_search_indexes(store, generation.table)
        if indexes["errors"] != "none":
            context.log.warning(
                f"{generation.table}: an index could not be built ({indexes['errors']}); "
                "search still works without it, only slower"
            )
        if indexes["actions"] != "none":
            context.log.info(f"search indexes of all sources: {indexes['actions']}")
        result = _added(parts)
        result.row_count = store.count(generation.table, f"source = {sql_string(source.name)}")
        only = run_scope(context)
        outcomes = [
            checks.chunks_have_documents(store, generation, source.name, only),
            checks.vectors_have_recorded_dimension(store, generation, source.name, only),
            checks.one_embedder_fingerprint(store, model.fingerprint),
        ]
        kind = source_kind(source, config.data_dir, config.index_uri)
        extra = {**source_metadata(source, kind), "embedder": model.fingerprint.describe()}
        if len(parts) > 1:
            extra["steps"] = len(parts)
        materialized = materialize_result(result, extra=extra)
    yield Output(None, "result", metadata=materialized.metadata)
    for outcome in outcomes:
        yield check_result(outcome)


def _added(parts: list[dict[str, Any]]) -> StageResult:
    """The parts' counts, added up (the generation key is the same in every part)."""
    result = StageResult()
    embedded = reused = 0
    for part in parts:
        for name, count in part["counts"].items():
            setattr(result, name, getattr(result, name) + count)
        embedded += part["extra"].get("embedded", 0)
        reused += part["extra"].get("vectors_reused", 0)
    devices = sorted(
        {str(p["extra"]["embedding_device"]) for p in parts if "embedding_device" in p["extra"]}
    )
    result.extra.update({"embedded": embedded, "vectors_reused": reused})
    if devices:  # each part's worker says where it embedded
        result.extra["embedding_device"] = ", ".join(devices)
    return result


@graph_asset(
    name=STAGE,
    partitions_def=sources_partitions,
    group_name=GROUP,
    kinds={"lancedb"},
    ins={"chunks": AssetIn(dagster_type=Nothing)},
    check_specs=CHECK_SPECS,
    description="Vectors for every chunk, reused by text hash; published to the served table.",
)
def embeddings(chunks: Any) -> dict[str, Any]:
    parts = plan_embedding(after=chunks).map(embed_part).collect()
    published = publish_embeddings(parts)
    return {"result": published.result, **{n: getattr(published, n) for n in _CHECK_OUTS}}
