"""Recording why a source's run failed, in the index itself, so `ragline status`,
MCP `status` and the CLI show it without asking Dagster (``rag_serving`` never
imports it). A later completed run supersedes the record.

A failure hook on ``index_source`` records it at once (``ragline index`` runs have no
daemon); the ``run_failures`` sensor catches the runs the UI launches through
Dagster's implicit asset job, which takes no hooks."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from dagster import (
    DefaultSensorStatus,
    HookContext,
    RunFailureSensorContext,
    failure_hook,
    run_failure_sensor,
)

from rag_assets.resources import RaglineConfigResource
from rag_assets.stages.result import utcnow
from rag_serving.errors import RaglineError
from rag_serving.index import schema as schemas
from rag_serving.index.store import IndexStore

PARTITION_TAG = "dagster/partition"
MESSAGE_LIMIT = 300


def one_line(message: str) -> str:
    """The last non-empty line of ``message`` (where Python puts the cause), capped."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    text = lines[-1] if lines else "no message"
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 1] + "…"


def record_run_failure(
    data_dir: Path, source: str, run_id: str, step: str | None, message: str
) -> None:
    """Remember that ``run_id`` of ``source`` failed in ``step`` because of ``message``."""
    row = {
        "source": source,
        "run_id": run_id,
        "step": step,
        "message": one_line(message),
        "failed_at": utcnow(),
    }
    IndexStore(data_dir).apply_changes(
        "run_failures", schemas.RUN_FAILURES, pa.Table.from_pylist([row], schemas.RUN_FAILURES)
    )


def _cause(exc: BaseException | None) -> str:
    """What the user needs to read: the first of our own errors in the chain (its
    message says what to do), else the innermost exception, not Dagster's wrapper."""
    chain = []
    while exc is not None and len(chain) < 20:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    if not chain:
        return "the step failed; see the run's logs in the Dagster UI"
    ours = [e for e in chain if isinstance(e, RaglineError)]
    chosen = ours[0] if ours else chain[-1]
    return str(chosen).strip() or type(chosen).__name__


@failure_hook(required_resource_keys={"settings"})
def record_failure(context: HookContext) -> None:
    """On a failed step of an indexing run, record the cause for its source."""
    run = context.instance.get_run_by_id(context.run_id)
    source = (run.tags.get(PARTITION_TAG) if run else None) or ""
    if not source:
        return
    data_dir = context.resources.settings.load().data_dir
    step = context.step_key.split(".")[-1] if context.step_key else None
    try:
        record_run_failure(data_dir, source, context.run_id, step, _cause(context.op_exception))
    except Exception as exc:  # never mask the run's own failure
        context.log.warning(f"could not record the failure in the index: {exc}")


def _error_names() -> set[str]:
    names, pending = set(), [RaglineError]
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return names


def _recorded_cause(error: object) -> str:
    """Like ``_cause``, for the serialised error a Dagster event carries."""
    chain = []
    while error is not None and len(chain) < 20:
        chain.append(error)
        error = getattr(error, "cause", None) or getattr(error, "context", None)
    ours = _error_names()
    chosen = next((e for e in chain if getattr(e, "cls_name", None) in ours), chain[-1])
    return str(getattr(chosen, "message", "") or "").strip() or "the step failed"


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
        step = (event.step_key or "").split(".")[-1] or None
        message = _recorded_cause(getattr(event.event_specific_data, "error", None))
    else:
        step, message = None, context.failure_event.message or "the run failed"
    record_run_failure(settings.load().data_dir, source, run.run_id, step, message)
