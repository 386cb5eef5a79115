"""Where the LanceDB tables live: a local folder, or object storage (``index_uri``).

``s3://bucket/prefix`` uses S3's conditional writes for LanceDB's commits, so
several writers are safe only on a store that honours them: before the first
write, ``check_conditional_writes`` puts a probe object twice with
``If-None-Match: *`` and refuses a store that accepts the second put.
``s3+ddb://bucket/prefix?ddbTableName=...`` commits through a DynamoDB table
instead (LanceDB's commit store), safe on any S3-compatible store.

Credentials, region and endpoint come from the usual AWS variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_REGION`` / ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL`` or
``AWS_ENDPOINT_URL_S3`` for an S3-compatible server, ``AWS_ENDPOINT_URL_DYNAMODB``
or ``AWS_ENDPOINT_URL`` for the commit store of ``s3+ddb://``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

from rag_sources.errors import ConfigError, ObjectStoreError

REMOTE_SCHEMES = ("s3", "s3+ddb")
UNSAFE_KEY = "allow_unsafe_concurrent_writes"
PROBE_FOLDER = "_ragline/probes"
log = logging.getLogger(__name__)
_checked: dict[str, bool] = {}  # uri → whether it honours conditional writes
_CHECK_LOCK = threading.Lock()


def is_remote(uri: str | None) -> bool:
    """Whether ``uri`` names object storage (not a local folder)."""
    return bool(uri) and urlsplit(str(uri)).scheme in REMOTE_SCHEMES


def index_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be an ``index_uri`` (None when it can)."""
    parts = urlsplit(uri)
    if len(parts.scheme) <= 1:  # a path (a one-letter scheme is a Windows drive)
        return None
    if parts.scheme not in REMOTE_SCHEMES:
        return (
            f"unsupported scheme {parts.scheme!r}; use a folder, s3://bucket/prefix or "
            "s3+ddb://bucket/prefix?ddbTableName=TABLE"
        )
    if not parts.netloc:
        return f"no bucket in it; write {parts.scheme}://BUCKET/prefix"
    if not parts.path.strip("/"):
        return f"no prefix after the bucket; write {parts.scheme}://{parts.netloc}/ragline"
    if parts.scheme == "s3+ddb" and not parse_qs(parts.query).get("ddbTableName"):
        return (
            "s3+ddb:// needs the DynamoDB table that holds the commits: add "
            "?ddbTableName=TABLE (a table with base_uri (string) as hash key and "
            "version (number) as range key)"
        )
    if parts.scheme == "s3" and parts.query:
        return "s3:// takes no ?options; credentials and endpoint come from AWS_* variables"
    return None


def bucket_and_prefix(uri: str) -> tuple[str, str]:
    """The bucket and the key prefix (no trailing slash) of a remote ``uri``."""
    parts = urlsplit(uri)
    return parts.netloc, parts.path.strip("/")


def storage_options(uri: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """LanceDB ``storage_options`` for ``uri`` from the AWS_* variables (empty for a
    local folder): LanceDB would read most of them itself, but not an endpoint
    given as ``AWS_ENDPOINT_URL``, nor allow plain HTTP to a local server."""
    if not is_remote(uri):
        return {}
    env = os.environ if env is None else env
    options: dict[str, str] = {}
    for name, key in (
        ("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
        ("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
        ("AWS_SESSION_TOKEN", "aws_session_token"),
    ):
        if env.get(name):
            options[key] = env[name]
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    endpoint = endpoint_url(env)
    if endpoint:
        options["endpoint"] = endpoint
        if endpoint.startswith("http://"):
            options["allow_http"] = "true"
    dynamodb = env.get("AWS_ENDPOINT_URL_DYNAMODB") or env.get("AWS_ENDPOINT_URL")
    if urlsplit(uri).scheme == "s3+ddb" and dynamodb:
        options["dynamodb_endpoint"] = dynamodb  # else the commit store asks AWS itself
    return options


def endpoint_url(env: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint named by the environment (None: AWS itself)."""
    env = os.environ if env is None else env
    return env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None


def s3_client(uri: str) -> object:
    """A boto3 S3 client for the bucket of ``uri``, configured as LanceDB is."""
    try:
        import boto3
    except ImportError as exc:  # an install without the `s3` extra
        raise ConfigError(
            f"index_uri {uri} needs boto3 to check the store: pip install 'ragline[s3]'"
        ) from exc
    options = storage_options(uri)
    return boto3.client(
        "s3",
        endpoint_url=options.get("endpoint"),
        region_name=options.get("region") or "us-east-1",
        aws_access_key_id=options.get("aws_access_key_id"),
        aws_secret_access_key=options.get("aws_secret_access_key"),
        aws_session_token=options.get("aws_session_token"),
    )


def honours_conditional_writes(uri: str) -> bool:
    """Put a probe object under ``uri`` with ``If-None-Match: *`` twice: a store that
    honours conditional writes refuses the second (412 Precondition Failed, or 409
    while the first is in flight). Deletes the probe. Raises ObjectStoreError
    when the store cannot be reached at all."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = bucket_and_prefix(uri)
    key = f"{prefix}/{PROBE_FOLDER}/{uuid.uuid4().hex}"
    client = s3_client(uri)
    try:
        client.put_object(Bucket=bucket, Key=key, Body=b"1", IfNoneMatch="*")  # type: ignore[attr-defined]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("NotImplemented", "InvalidArgument", "InvalidRequest"):
            return False  # the store does not know If-None-Match at all
        raise ObjectStoreError(
            f"index_uri {uri}: cannot write to the bucket ({code}); check the AWS_* "
            "credentials and that the bucket exists"
        ) from exc
    except BotoCoreError as exc:
        raise ObjectStoreError(f"index_uri {uri}: cannot reach the store ({exc})") from exc
    try:
        client.put_object(Bucket=bucket, Key=key, Body=b"2", IfNoneMatch="*")  # type: ignore[attr-defined]
    except ClientError as exc:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = exc.response.get("Error", {}).get("Code", "")
        return status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict")
    finally:
        with contextlib.suppress(ClientError, BotoCoreError):  # a leftover probe is harmless
            client.delete_object(Bucket=bucket, Key=key)  # type: ignore[attr-defined]
    return False


def check_conditional_writes(uri: str, allow_unsafe: bool = False) -> None:
    """Refuse to write to an ``s3://`` index whose store ignores conditional writes
    (concurrent writers would lose commits silently), once per process and URI;
    with ``allow_unsafe`` (one writer only), warn instead."""
    if urlsplit(uri).scheme != "s3":
        return  # a local folder (atomic renames) or the DynamoDB commit store
    with _CHECK_LOCK:
        if uri not in _checked:
            _checked[uri] = honours_conditional_writes(uri)
    if _checked[uri]:
        return
    bucket, prefix = bucket_and_prefix(uri)
    message = (
        f"index_uri {uri}: the store ignores conditional writes (If-None-Match), so "
        "concurrent writers would lose commits silently; use "
        f"s3+ddb://{bucket}/{prefix}?ddbTableName=TABLE (DynamoDB commits) or, with "
        f"exactly one writer, set {UNSAFE_KEY} = true"
    )
    if not allow_unsafe:
        raise ObjectStoreError(message)
    log.warning("%s (%s = true: writing anyway)", message, UNSAFE_KEY)
