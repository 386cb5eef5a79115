"""Writing benchmark results: JSON under benchmarks/results/ and a section of
docs/benchmarks.md (replaced in place between markers, so reruns update it)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "benchmarks.md"
SHARED_DATA = REPO.parent / "shared" / "data"


def machine() -> str:
    """A one-line description of the machine the numbers come from."""
    import psutil

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = psutil.virtual_memory().total / 2**30
    return (
        f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GiB RAM, Python {platform.python_version()}"
    )


def git_revision() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip()
    except OSError:
        return "unknown"


def save(name: str, data: dict[str, Any], markdown: str, command: str) -> None:
    """Save ``data`` as JSON and put ``markdown`` under heading ``name`` in the doc."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    payload = {"benchmark": name, "date": stamp, "machine": machine(), "revision": git_revision(),
               "command": command, **data}  # fmt: skip
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
    section = (
        f"<!-- {name}:start -->\n"
        f"Machine: {payload['machine']}. Date: {stamp}. Revision: {payload['revision']}.\n"
        f"Reproduce: `{command}`\n\n{markdown.strip()}\n"
        f"<!-- {name}:end -->"
    )
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    if start in text and end in text:
        before = text[: text.index(start)]
        after = text[text.index(end) + len(end) :]
        text = before + section + after
    else:
        text = text.rstrip() + f"\n\n## {name}\n\n{section}\n"
    DOC.write_text(text)
    print(f"wrote {RESULTS / (name + '.json')} and the '{name}' section of {DOC}")
