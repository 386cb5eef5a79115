"""The index's commit lock: one writer commits at a time, everywhere.

Indexing runs of different sources proceed in parallel (parsing, chunking and
embedding need no lock); each commit to a LanceDB table, each update of the
generation manifest and each Tantivy commit is made while holding this lock, so
commits are serialised and every one starts from the latest table version.

On one host a lock file under the data dir does it (``flock``; it goes with the
process that held it, a SIGKILL included). Writers on several hosts share the
Dagster instance's Postgres database, and take a Postgres advisory lock there
(session-level: the server releases it when the holder's connection drops).
Both are reentrant within a thread: a stage holding the lock may call store
methods that take it too.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol


class CommitLock(Protocol):
    """A reentrant, cross-process lock held around each commit."""

    def __enter__(self) -> CommitLock: ...

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def describe(self) -> str: ...


class _Reentrant:
    """Counts the holds of each thread; the underlying lock is taken on the first and
    released on the last."""

    def __init__(self) -> None:
        self._local = threading.local()

    def __enter__(self) -> _Reentrant:
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            self._local.handle = self._acquire()
        self._local.depth = depth + 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._local.depth -= 1
        if self._local.depth == 0:
            handle, self._local.handle = self._local.handle, None
            self._release(handle)

    def _acquire(self) -> Any:
        raise NotImplementedError

    def _release(self, handle: Any) -> None:
        raise NotImplementedError


class FileCommitLock(_Reentrant):
    """``flock`` on a file: exclusive among the processes (and threads: each hold opens
    the file anew) of one host."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = path

    def _acquire(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _release(self, handle: int) -> None:
        try:
            fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            os.close(handle)

    def describe(self) -> str:
        return f"lock file {self.path}"


class PostgresCommitLock(_Reentrant):
    """A session-level advisory lock in Postgres, shared by every host writing the
    index; its key is derived from ``name`` (the index's location)."""

    def __init__(self, url: str, name: str):
        super().__init__()
        self.url = url.replace("postgresql+psycopg2://", "postgresql://", 1)
        digest = hashlib.sha256(f"ragline commit lock {name}".encode()).digest()
        self.key = int.from_bytes(digest[:8], "big", signed=True)

    def _acquire(self) -> Any:
        import psycopg2

        connection = psycopg2.connect(self.url, application_name="ragline commit lock")
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s)", (self.key,))
        except BaseException:
            connection.close()
            raise
        return connection

    def _release(self, handle: Any) -> None:
        try:
            with handle.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        finally:
            handle.close()

    def describe(self) -> str:
        return f"Postgres advisory lock {self.key}"


_SHARED: dict[tuple[str, ...], _Reentrant] = {}
_SHARED_GUARD = threading.Lock()


def local_commit_lock(data_dir: Path) -> FileCommitLock:
    """The lock of an index written from one host: one object per data dir in a
    process, so that two stores of one index in one thread nest instead of waiting
    for each other."""
    path = (Path(data_dir) / "commit.lock").resolve()
    with _SHARED_GUARD:
        lock = _SHARED.setdefault(("file", str(path)), FileCommitLock(path))
    assert isinstance(lock, FileCommitLock)
    return lock


def postgres_commit_lock(url: str, name: str) -> PostgresCommitLock:
    """The lock of an index written from several hosts, one object per database and
    index in a process (see ``local_commit_lock``)."""
    with _SHARED_GUARD:
        lock = _SHARED.setdefault(("postgres", url, name), PostgresCommitLock(url, name))
    assert isinstance(lock, PostgresCommitLock)
    return lock
