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

from typing import Any

from dagster import ExecutorDefinition, in_process_executor, multiprocess_executor

from rag_serving.config import DagsterConfig
from rag_serving.errors import RaglineError

# Celery settings shared by the executor (which sends steps) and `ragline worker`.
CELERY_QUEUE = "dagster"  # the queue dagster-celery routes steps to
CELERY_SETTINGS: dict[str, Any] = {
    # A worker takes one step at a time: a waiting step goes to the next free worker.
    "worker_prefetch_multiplier": 1,
    # Acknowledged when taken: a worker killed mid-step loses its step instead of
    # having it run again behind the back of a newer run (the run is reaped and the
    # next run repairs the index; see recovery.py).
    "task_acks_late": False,
    "broker_connection_retry_on_startup": True,
    "result_expires": 24 * 3600,
}


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
        from dagster_celery import celery_executor

        env = dagster.celery_broker_url_env
        return celery_executor.configured(
            {
                "broker": {"env": env},
                "backend": {"env": env},
                "config_source": dict(CELERY_SETTINGS),
            },
            name="celery",
        )
    return in_process_executor


def celery_app(dagster: DagsterConfig) -> Any:
    """The Celery app a worker serves: dagster-celery's tasks, on the broker and with
    the settings the executor sends steps with."""
    from dagster_celery.config import DEFAULT_CONFIG, dict_wrapper
    from dagster_celery.make_app import make_app
    from dagster_celery.tasks import create_execute_job_task, create_resume_job_task, create_task

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

    def __init__(self, dagster: DagsterConfig):
        self.app = celery_app(dagster)
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
