"""Reading a JSON-lines export, bounded: at most ``max_bytes`` of it, and a line that
is not a JSON object with an ``id`` and a ``text`` is listed with its problem."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_sources.errors import SourceUnavailableError


@dataclass(frozen=True)
class Record:
    key: str  # the record's id, or "line-<n>" for a line that has none
    fingerprint: str  # a hash of the line: a new line is a changed record
    line: bytes
    data: dict[str, Any] | None = None
    problem: str | None = None


def read_records(path: Path, max_bytes: int) -> Iterator[Record]:
    try:
        size = path.stat().st_size
        handle = path.open("rb")
    except OSError as exc:
        raise SourceUnavailableError(f"{path}: cannot be read ({exc.strerror})") from exc
    if size > max_bytes:
        handle.close()
        raise SourceUnavailableError(
            f"{path}: {size:,} bytes, above the source's max_export_bytes ({max_bytes:,})"
        )
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            digest = hashlib.sha256(line).hexdigest()[:32]
            try:
                data = json.loads(line)
            except ValueError as exc:
                yield Record(
                    f"line-{number}", digest, line, problem=f"line {number}: not JSON ({exc})"
                )
                continue
            if (
                not isinstance(data, dict)
                or not isinstance(data.get("text"), str)
                or "id" not in data
            ):
                yield Record(
                    f"line-{number}", digest, line,
                    problem=f'line {number}: not an object with an "id" and a "text"',
                )  # fmt: skip
                continue
            yield Record(str(data["id"]), digest, line, data)
