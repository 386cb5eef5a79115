"""Small values passed between the steps of one run, kept in the run's own event
log: a step on another host (a Celery worker) reads them through the Dagster
instance every host shares, nothing is left on one host's disk, and they go when
the run is deleted. For plans and counts, never for data (``MAX_VALUE_BYTES``)."""

from __future__ import annotations

import json
from typing import Any

from dagster import ConfigurableIOManager, DagsterEventType, InputContext, OutputContext

from rag_sources.errors import RaglineError

RUN_VALUES = "run_values"  # the resource key ops name in io_manager_key
MAX_VALUE_BYTES = 64 * 1024
_VALUE, _MAPPING_KEY = "ragline/value", "ragline/mapping_key"


class RunValueError(RaglineError):
    """A value too large for the run's event log, or one that is not there."""


class RunValuesIOManager(ConfigurableIOManager):
    """Stores an output (JSON) as the metadata of its ``HANDLED_OUTPUT`` event."""

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        text = json.dumps(obj, sort_keys=True)
        if len(text.encode("utf-8")) > MAX_VALUE_BYTES:
            raise RunValueError(
                f"{context.step_key}: output {context.name!r} is {len(text)} characters of "
                f"JSON; the run's event log holds at most {MAX_VALUE_BYTES} bytes per value"
            )
        context.add_output_metadata({_VALUE: text, _MAPPING_KEY: context.mapping_key or ""})

    def load_input(self, context: InputContext) -> Any:
        upstream = context.upstream_output
        if upstream is None:
            raise RunValueError(f"input {context.name!r} has no upstream output to read")
        run_id = context.step_context.run_id
        records = context.instance.all_logs(run_id, of_type=DagsterEventType.HANDLED_OUTPUT)
        for record in records:
            event = record.dagster_event
            if event is None or event.step_key != upstream.step_key:
                continue
            data = event.event_specific_data
            metadata = getattr(data, "metadata", None) or {}
            mapping = metadata.get(_MAPPING_KEY)
            if (
                getattr(data, "output_name", None) == upstream.name
                and _VALUE in metadata
                and mapping is not None
                and mapping.value == (upstream.mapping_key or "")
            ):
                return json.loads(metadata[_VALUE].value)
        raise RunValueError(
            f"run {run_id}: no value of {upstream.step_key} output {upstream.name!r}"
            f"{f' [{upstream.mapping_key}]' if upstream.mapping_key else ''} in its event log"
        )
