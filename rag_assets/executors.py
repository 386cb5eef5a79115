"""Where a run's steps execute, from ``[dagster] executor``: Dagster's own executors.

- ``in_process`` (default): every step in the run's process; the embedder loads
  once per process and stays loaded across runs (``ragline index``, ``watch``).
- ``multiprocess``: each step in a child process of the run (parallel runs on one
  host use every core; each embedding step loads the model itself).
- ``celery``: each step is a task on a Celery queue (Redis or AMQP broker), run by
  ``ragline worker`` processes on any host sharing the Postgres instance; a worker
  keeps its embedder loaded across tasks (``-P solo``: the task runs in the
  worker's own process).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from dagster import ExecutorDefinition, in_process_executor, multiprocess_executor

from rag_serving.config import DagsterConfig
from rag_sources.errors import RaglineError

# Celery settings shared by the executor (which sends steps) and `ragline worker`.
CELERY_QUEUE = "dagster"  # the queue dagster-celery routes steps to
CELERY_SETTINGS: dict[str, Any] = {
    # A worker takes one step at a time: a waiting step goes to the next free worker.
    "worker_prefetch_multiplier": 1,
    # ...and reserves none while it runs one (Redis brokers; Celery 5.6+): with early
    # acknowledgement the prefetch limit counts only unacknowledged messages, so a
    # busy worker would otherwise hold the next step while another worker is idle
    # (the parts of one source's embedding would run one after the other).
    "worker_disable_prefetch": True,
    # Acknowledged when taken: a worker killed mid-step loses its step instead of
    # having it run again behind the back of a newer run (the run is reaped and the
    # next run repairs the index; see recovery.py).
    "task_acks_late": False,
    "broker_connection_retry_on_startup": True,
    "result_expires": 24 * 3600,
}


def share_cores(processes: int, threads: int | None = None) -> int:
    """Give this process's embedder ``threads`` threads (PyTorch and ONNX Runtime),
    by default its share of the host's cores when ``processes`` index on it at once:
    each runtime takes every core in every process, so N processes would ask for N
    times the cores there are. Returns the number set."""
    from rag_serving.embedders.sentence_transformers import set_embedding_threads

    count = threads or max(1, (os.cpu_count() or 1) // max(1, processes))
    set_embedding_threads(count)
    return count


def celery_app_args(dagster: DagsterConfig) -> dict[str, Any]:
    """``celery.Celery`` arguments for the configured broker (the result backend is
    the broker's server too)."""
    url = dagster.broker_url()
    return {"broker": url, "backend": url}


def executor_for(dagster: DagsterConfig) -> ExecutorDefinition:
    """The executor of ragline's jobs for ``[dagster]`` settings."""
    if dagster.executor == "multiprocess":
        return multiprocess_executor
    if dagster.executor == "celery":
        env = dagster.celery_broker_url_env
        return watched_celery_executor().configured(
            {
                "broker": {"env": env},
                "backend": {"env": env},
                "config_source": dict(CELERY_SETTINGS),
            },
            name="celery",
        )
    return in_process_executor


def watched_celery_executor() -> ExecutorDefinition:
    """dagster-celery's executor, with the run's steps watched (``WatchedCelery``)."""
    from dagster import executor
    from dagster._core.definitions.executor_definition import (
        multiple_process_executor_requirements,
    )
    from dagster._core.execution.retries import RetryMode
    from dagster_celery.executor import CELERY_CONFIG

    @executor(
        name="celery",
        config_schema=CELERY_CONFIG,
        requirements=multiple_process_executor_requirements(),
    )
    def _celery(init_context: Any) -> Any:
        config = init_context.executor_config
        return _watched_class()(
            retries=RetryMode.from_config(config["retries"]),
            broker=config.get("broker"),
            backend=config.get("backend"),
            config_source=config.get("config_source"),
            include=config.get("include"),
        )

    return _celery


def _watched_class() -> type:
    from dagster._core.errors import DagsterSubprocessError
    from dagster_celery.executor import CeleryExecutor

    from rag_assets.recovery import StepWatch

    class WatchedCelery(CeleryExecutor):
        """Sends steps to Celery workers like dagster-celery, and watches the worker
        recorded on the run: a worker killed mid-step never answers and the executor
        would wait for it forever; once it is dead, the step's task is failed in the
        result backend and the run ends with the reason."""

        def execute(self, plan_context: Any, execution_plan: Any) -> Any:
            # dagster-celery registers its task anew for each step it sends: Celery
            # 5.7 warns each time that the same name is taken (harmless).
            from celery.exceptions import DuplicateTaskNameWarning

            warnings.simplefilter("ignore", DuplicateTaskNameWarning)
            steps = PublishedSteps(self.app_args())
            watch = StepWatch(plan_context.instance, plan_context.run_id, steps.fail_unfinished)
            with steps, watch:
                try:
                    yield from super().execute(plan_context, execution_plan)
                except DagsterSubprocessError:
                    if steps.lost is not None:
                        raise WorkerLost(steps.lost) from None
                    raise

    return WatchedCelery


def celery_app(dagster: DagsterConfig) -> Any:
    """The Celery app a worker serves: dagster-celery's tasks, on the broker and with
    the settings the executor sends steps with; each step's claim is held until its
    task's result is stored (``hold_claims_until_task_ends``)."""
    from dagster_celery.config import DEFAULT_CONFIG, dict_wrapper
    from dagster_celery.make_app import make_app
    from dagster_celery.tasks import create_execute_job_task, create_resume_job_task, create_task

    from rag_assets.recovery import hold_claims_until_task_ends

    hold_claims_until_task_ends()
    settings = dict_wrapper(dict(DEFAULT_CONFIG, **CELERY_SETTINGS))
    app = make_app({**celery_app_args(dagster), "config_source": settings})
    create_task(app)
    create_execute_job_task(app)
    create_resume_job_task(app)
    return app


class PublishedSteps:
    """The Celery tasks (steps) this process sends while it orchestrates one run, so
    that a step whose worker died can be failed in the result backend: the executor
    then sees the step fail and ends the run, instead of waiting for an answer that
    never comes (a task taken by a worker is gone from the queue)."""

    def __init__(self, app_args: dict[str, Any]):
        from dagster_celery.make_app import make_app

        self.app = make_app(app_args)
        self.task_ids: list[str] = []
        self.lost: str | None = None  # why a step was failed here

    def __enter__(self) -> PublishedSteps:
        from celery.signals import after_task_publish

        after_task_publish.connect(self._published, weak=False)
        return self

    def __exit__(self, *exc: object) -> None:
        from celery.signals import after_task_publish

        after_task_publish.disconnect(self._published)

    def _published(self, sender: str | None = None, headers: dict | None = None, **_: Any) -> None:
        task_id = (headers or {}).get("id")
        if task_id:
            self.task_ids.append(task_id)

    def fail_unfinished(self, reason: str) -> None:
        """Record every sent step still without a result as failed with ``reason``."""
        for task_id in self.task_ids:
            result = self.app.AsyncResult(task_id)
            if not result.ready():
                self.lost = f"the Celery worker running a step died: {reason}"
                self.app.backend.mark_as_failure(task_id, WorkerLost(self.lost))


class WorkerLost(RaglineError):
    """The worker running a step died before answering."""
