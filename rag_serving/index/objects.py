"""Small state files every host must share, kept as objects beside a remote index.

``RemotePath`` offers the few ``pathlib.Path`` operations the state files use
(read, write, stat, unlink, replace), so the code that writes a deferred marker or
a feed archive stays the same whether the index is local or on object storage.
One PUT replaces an object whole: readers see the old content or the new.
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from rag_serving.index.location import bucket_and_prefix, endpoint_url, s3_client

SHARED_FOLDER = "_ragline"  # under the index's prefix, beside the tables


@dataclass(frozen=True)
class RemoteStat:
    st_size: int
    st_mtime_ns: int


@dataclass(frozen=True)
class RemotePath:
    """An object (or a prefix of objects) under ``uri``'s bucket, as a path."""

    uri: str  # scheme://bucket/key (the index_uri's scheme; any query is left out)

    def __truediv__(self, name: str) -> RemotePath:
        return RemotePath(f"{self.uri.rstrip('/')}/{name}")

    def __str__(self) -> str:
        return self.uri

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> RemotePath:
        return RemotePath(self.uri.rstrip("/").rsplit("/", 1)[0])

    @property
    def suffix(self) -> str:
        stem, dot, ext = self.name.rpartition(".")
        return f".{ext}" if dot and stem else ""

    def with_suffix(self, suffix: str) -> RemotePath:
        return self.parent / (self.name[: len(self.name) - len(self.suffix)] + suffix)

    def with_name(self, name: str) -> RemotePath:
        return self.parent / name

    @property
    def _bucket_key(self) -> tuple[str, str]:
        return bucket_and_prefix(self.uri)

    def _client(self) -> Any:
        return _client_for(self._bucket_key[0], endpoint_url())

    # ---- what the state files use ---------------------------------------------------

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: object storage has no folders."""

    def is_dir(self) -> bool:
        return True  # a prefix holds whatever is put under it

    def read_bytes(self) -> bytes:
        from botocore.exceptions import ClientError

        bucket, key = self._bucket_key
        try:
            reply = self._client().get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise FileNotFoundError(self.uri) from None
            raise OSError(f"{self.uri}: {exc}") from exc
        return bytes(reply["Body"].read())

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> int:
        bucket, key = self._bucket_key
        self._client().put_object(Bucket=bucket, Key=key, Body=data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def stat(self) -> RemoteStat:
        from botocore.exceptions import ClientError

        bucket, key = self._bucket_key
        try:
            head = self._client().head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(self.uri) from None
            raise OSError(f"{self.uri}: {exc}") from exc
        modified: datetime = head["LastModified"]
        # The ETag changes with every write even within one second (LastModified's
        # resolution): folded in, so a rewritten marker never looks unchanged.
        etag = zlib.crc32(str(head.get("ETag", "")).encode()) % 10**9
        return RemoteStat(int(head["ContentLength"]), int(modified.timestamp()) * 10**9 + etag)

    def exists(self) -> bool:
        try:
            self.stat()
        except FileNotFoundError:
            return False
        return True

    def is_file(self) -> bool:
        return self.exists()

    def unlink(self, missing_ok: bool = False) -> None:
        if not missing_ok and not self.exists():
            raise FileNotFoundError(self.uri)
        bucket, key = self._bucket_key
        self._client().delete_object(Bucket=bucket, Key=key)

    def replace(self, target: RemotePath) -> RemotePath:
        """Copy to ``target``, then delete this object (not atomic: a copy may stay)."""
        bucket, key = self._bucket_key
        target_bucket, target_key = target._bucket_key
        client = self._client()
        client.copy_object(
            Bucket=target_bucket, Key=target_key, CopySource={"Bucket": bucket, "Key": key}
        )
        with contextlib.suppress(Exception):
            client.delete_object(Bucket=bucket, Key=key)
        return target


@cache
def _client_for(bucket: str, endpoint: str | None) -> Any:
    """One client per bucket and endpoint (``endpoint`` keys the cache)."""
    return s3_client(f"s3://{bucket}")


def shared_root(index_uri: str) -> RemotePath:
    """Where the shared state of the index at ``index_uri`` lives."""
    bucket, prefix = bucket_and_prefix(index_uri)
    return RemotePath(f"s3://{bucket}/{prefix}/{SHARED_FOLDER}")
