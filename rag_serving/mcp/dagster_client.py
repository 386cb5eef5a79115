"""Launching an indexing run through a running Dagster webserver's GraphQL API.

``ragline ui`` writes ``<DAGSTER_HOME>/webserver.json`` (its URL and pid) while it
runs. Talking to it over HTTP keeps ``rag_serving`` free of ``dagster`` imports;
the run is queued like one launched from the UI and executed by its daemon.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rag_serving.config import RaglineConfig
from rag_serving.index.layout import IndexLayout
from rag_sources.errors import RaglineError

WEBSERVER_MARKER = "webserver.json"
INDEX_JOB = "index_source"
TERMINAL = ("SUCCESS", "FAILURE", "CANCELED")

_REPOSITORIES = """
{ repositoriesOrError { __typename
  ... on RepositoryConnection { nodes { name location { name } jobs { name }
      assetNodes { partitionDefinition { dimensionTypes { dynamicPartitionsDefinitionName } } } } }
  ... on Error { message } } }"""
_ADD_PARTITION = """
mutation($repo: RepositorySelector!, $def: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $repo, partitionsDefName: $def, partitionKey: $key) {
    __typename ... on Error { message } } }"""
_LAUNCH = """
mutation($params: ExecutionParams!) { launchRun(executionParams: $params) { __typename
  ... on LaunchRunSuccess { run { runId status } }
  ... on RunConfigValidationInvalid { errors { message } }
  ... on Error { message } } }"""
_STATUS = """
query($id: ID!) { runOrError(runId: $id) { __typename
  ... on Run { status startTime endTime } ... on Error { message } } }"""
_LOGS = """
query($id: ID!) { logsForRun(runId: $id, limit: 5000) { __typename
  ... on EventConnection { events { __typename
    ... on MaterializationEvent { assetKey { path } metadataEntries { label
        ... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue }
        ... on BoolMetadataEntry { boolValue } } }
    ... on ExecutionStepFailureEvent { error { message causes { message } } }
    ... on RunFailureEvent { message } } }
  ... on Error { message } } }"""


class DagsterUnavailable(Exception):
    """No Dagster webserver answers (fall back to an in-process run)."""


@dataclass
class RunResult:
    run_id: str
    status: str
    seconds: float
    assets: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None


def dagster_home(config: RaglineConfig) -> Path:
    """``$DAGSTER_HOME`` when set, else ``<data_dir>/dagster`` (as ``ragline ui`` uses)."""
    env = os.environ.get("DAGSTER_HOME")
    return Path(env).expanduser() if env else IndexLayout(config.data_dir).dagster_home


def running_webserver(config: RaglineConfig) -> str | None:
    """The URL of the running ``ragline ui`` of this project, if one is running."""
    marker = dagster_home(config) / WEBSERVER_MARKER
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
        url, pid = str(info["url"]).rstrip("/"), int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a stale marker: `ragline ui` was killed
    except PermissionError:
        pass
    return url


class DagsterClient:
    """Just enough of the webserver's GraphQL API to run ``index_source`` for a source."""

    def __init__(self, url: str, timeout_s: float = 30.0):
        self.url = url
        self._http = httpx.Client(base_url=url, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def _query(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            response = self._http.post("/graphql", json={"query": query, "variables": variables})
        except httpx.TransportError as exc:
            raise DagsterUnavailable(f"Dagster webserver at {self.url}: {exc}") from exc
        if response.status_code != 200:
            raise RaglineError(
                f"Dagster webserver at {self.url} answered HTTP {response.status_code}"
            )
        body = response.json()
        if body.get("errors"):
            raise RaglineError(f"Dagster GraphQL error: {body['errors'][0].get('message')}")
        return body["data"]

    def _job_location(self) -> tuple[dict[str, str], str | None]:
        """The repository selector holding ``index_source`` and its partitions' name."""
        data = self._query(_REPOSITORIES)["repositoriesOrError"]
        if data["__typename"] != "RepositoryConnection":
            raise RaglineError(f"Dagster cannot list its code locations: {data.get('message')}")
        for repo in data["nodes"]:
            if any(job["name"] == INDEX_JOB for job in repo["jobs"]):
                selector = {
                    "repositoryLocationName": repo["location"]["name"],
                    "repositoryName": repo["name"],
                }
                names = {
                    dim["dynamicPartitionsDefinitionName"]
                    for node in repo["assetNodes"]
                    if node.get("partitionDefinition")
                    for dim in node["partitionDefinition"]["dimensionTypes"]
                    if dim.get("dynamicPartitionsDefinitionName")
                }
                return selector, next(iter(sorted(names)), None)
        raise RaglineError(
            f"the Dagster webserver at {self.url} has no `{INDEX_JOB}` job; "
            "is it running ragline's code location (`ragline ui`)?"
        )

    def launch(self, source: str, full: bool) -> str:
        """Queue ``index_source`` for partition ``source``; returns the run id."""
        selector, partitions = self._job_location()
        if partitions:
            added = self._query(
                _ADD_PARTITION, {"repo": selector, "def": partitions, "key": source}
            )["addDynamicPartition"]
            kind = added["__typename"]
            if kind not in ("AddDynamicPartitionSuccess", "DuplicateDynamicPartitionError"):
                raise RaglineError(f"Dagster refused partition {source!r}: {added.get('message')}")
        tags = [
            {"key": "dagster/partition", "value": source},
            {"key": "ragline/launched_by", "value": "mcp"},
        ]
        if full:
            tags.append({"key": "ragline/full", "value": "true"})
        params = {
            "selector": {**selector, "jobName": INDEX_JOB},
            "executionMetadata": {"tags": tags},
        }
        result = self._query(_LAUNCH, {"params": params})["launchRun"]
        if result["__typename"] == "LaunchRunSuccess":
            return str(result["run"]["runId"])
        message = result.get("message") or "; ".join(e["message"] for e in result.get("errors", []))
        raise RaglineError(f"Dagster could not launch `{INDEX_JOB}` for {source!r}: {message}")

    def wait(self, run_id: str, timeout_s: float, poll_s: float = 0.5) -> RunResult:
        """Poll the run until it ends or ``timeout_s`` passes."""
        started = time.monotonic()
        status = "QUEUED"
        while True:
            run = self._query(_STATUS, {"id": run_id})["runOrError"]
            if run["__typename"] != "Run":
                raise RaglineError(f"Dagster lost run {run_id}: {run.get('message')}")
            status = run["status"]
            elapsed = time.monotonic() - started
            if status in TERMINAL or elapsed >= timeout_s:
                break
            time.sleep(poll_s)
        result = RunResult(run_id, status, round(time.monotonic() - started, 2))
        if status in TERMINAL:
            if run.get("startTime") and run.get("endTime"):
                result.seconds = round(run["endTime"] - run["startTime"], 2)
            self._read_events(result)
        return result

    def _read_events(self, result: RunResult) -> None:
        logs = self._query(_LOGS, {"id": result.run_id})["logsForRun"]
        for event in logs.get("events", []):
            kind = event["__typename"]
            if kind == "MaterializationEvent":
                values = {}
                for entry in event["metadataEntries"]:
                    for key in ("intValue", "floatValue", "boolValue"):
                        if entry.get(key) is not None:
                            values[entry["label"]] = entry[key]
                result.assets["/".join(event["assetKey"]["path"])] = values
            elif kind == "ExecutionStepFailureEvent" and result.error is None:
                error = event["error"] or {}
                innermost = (error.get("causes") or [error])[-1]
                result.error = _last_line(innermost.get("message") or "")
            elif kind == "RunFailureEvent" and result.error is None:
                result.error = _last_line(event.get("message") or "")
        if result.status == "FAILURE" and not result.error:
            result.error = "the run failed; see its logs in the Dagster UI"


def _last_line(message: str) -> str | None:
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return lines[-1] if lines else None
