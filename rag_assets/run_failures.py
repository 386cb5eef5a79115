"""Recording why a source's run failed, in the index itself, so `ragline status`,
MCP `status` and the CLI show it without asking Dagster (``rag_serving`` never
imports it). A later completed run supersedes the record.

A failure hook on ``index_source`` records it at once (``ragline index`` runs have no
daemon); the ``run_failures`` sensor catches the runs the UI launches through
Dagster's implicit asset job, which takes no hooks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
from dagster import (
    DagsterError,
    DefaultSensorStatus,
    Failure,
    HookContext,
    RetryRequested,
    RunFailureSensorContext,
    failure_hook,
    run_failure_sensor,
)

from rag_assets.resources import RaglineConfigResource, writer_store
from rag_assets.stages.result import utcnow
from rag_serving.config import RaglineConfig
from rag_serving.index import schema as schemas
from rag_sources.errors import RaglineError

PARTITION_TAG = "dagster/partition"
MESSAGE_LIMIT = 300


class NothingIndexed(Failure):
    """Every item of a source failed (none is indexed): the run fails, so the exit
    code, the UI and `ragline status` say so. Raised by the last step, once the index
    holds what the run found (documents of items that now fail removed everywhere);
    recorded as a failure of ``STEP``, where the items failed."""

    STEP = "parsed_documents"


@contextmanager
def readable_failure(source: str, step: str) -> Iterator[None]:
    """Re-raise an error of a step as a ``Failure`` whose description is its one-line
    cause (``error_summary``), chained to the error: Dagster shows a Failure's
    description first, on the step and on the run's failure, where any other error
    shows as "Error occurred while executing op …" with the cause further down."""
    try:
        yield
    except (Failure, RetryRequested, DagsterError):
        raise
    except Exception as exc:
        raise Failure(
            description=error_summary(exc),
            metadata={"source": source, "step": step, "error": type(exc).__name__},
        ) from exc


def stage_of(step_key: str | None) -> str | None:
    """The asset a step belongs to: ``embeddings`` for ``embeddings.embed_part[part2]``
    (a graph-backed asset's ops are prefixed with its name)."""
    return step_key.split(".")[0] if step_key else None


def one_line(message: str) -> str:
    """The last non-empty line of ``message`` (where Python puts the cause), capped."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    text = lines[-1] if lines else "no message"
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def record_run_failure(
    config: RaglineConfig, source: str, run_id: str, step: str | None, message: str
) -> None:
    """Remember that ``run_id`` of ``source`` failed in ``step`` because of ``message``."""
    row = {
        "source": source,
        "run_id": run_id,
        "step": step,
        "message": one_line(message),
        "failed_at": utcnow(),
    }
    writer_store(config).apply_changes(
        "run_failures", schemas.RUN_FAILURES, pa.Table.from_pylist([row], schemas.RUN_FAILURES)
    )


def error_summary(error: object) -> str:
    """What the user needs to read from a failure — a live exception or the serialised
    error a Dagster event carries: the outermost of ragline's own errors in its chain
    of causes (it says what to do, e.g. which Ollama host is down; the library error
    under it does not), else the innermost cause with its class name; on one line.
    A live error and its serialised form read the same."""
    chain: list[object] = []
    while error is not None and len(chain) < 20:
        chain.append(error)
        error = _next_cause(error)
    if not chain:
        return "the step failed; see the run's logs in the Dagster UI"
    ours = _ragline_error_names()
    chosen = next((e for e in chain if _class_name(e) in ours), chain[-1])
    text = str(getattr(chosen, "message", chosen) or "").strip()
    name = _class_name(chosen)
    # a serialised error reads "module.Class: text"; the text stands alone
    head, _, rest = text.partition(": ")
    if rest and head.endswith(name) and " " not in head:
        text = rest
    if name in ours or name in _FAILURES:
        return " ".join(text.split()) or name
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{name}: {lines[-1]}" if lines else name


# Failures ragline raises: their description is the whole message, on one line.
_FAILURES = {"Failure", "NothingIndexed"}


def _next_cause(error: object) -> object:
    if isinstance(error, BaseException):
        return error.__cause__ or error.__context__
    return getattr(error, "cause", None) or getattr(error, "context", None)


def _class_name(error: object) -> str:
    return type(error).__name__ if isinstance(error, BaseException) else error.cls_name  # type: ignore[attr-defined]


def _ragline_error_names() -> set[str]:
    names, pending = set(), [RaglineError]
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return names


@failure_hook(required_resource_keys={"settings"})
def record_failure(context: HookContext) -> None:
    """On a failed step of an indexing run, record the cause for its source."""
    run = context.instance.get_run_by_id(context.run_id)
    source = (run.tags.get(PARTITION_TAG) if run else None) or ""
    if not source:
        return
    config = context.resources.settings.load()
    step = stage_of(context.step_key)
    if isinstance(context.op_exception, NothingIndexed):
        step = NothingIndexed.STEP
    try:
        record_run_failure(
            config, source, context.run_id, step, error_summary(context.op_exception)
        )
    except Exception as exc:  # never mask the run's own failure
        context.log.warning(f"could not record the failure in the index: {exc}")


@run_failure_sensor(
    name="run_failures",
    default_status=DefaultSensorStatus.RUNNING,
    description="Records each failed indexing run's cause for `ragline status` and MCP `status`.",
)
def run_failures(context: RunFailureSensorContext, settings: RaglineConfigResource) -> None:
    run = context.dagster_run
    source = run.tags.get(PARTITION_TAG)
    if not source:
        return  # not an indexing run (maintenance)
    steps = context.get_step_failure_events()
    if steps:
        event = steps[0]
        step = stage_of(event.step_key)
        error = getattr(event.event_specific_data, "error", None)
        if error is not None and error.cls_name == NothingIndexed.__name__:
            step = NothingIndexed.STEP
        message = error_summary(error)
    else:
        step, message = None, context.failure_event.message or "the run failed"
    record_run_failure(settings.load(), source, run.run_id, step, message)
