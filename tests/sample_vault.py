"""A small Obsidian-style vault for tests: distinct topics, tags, dates, links and
deliberately broken files. Written fresh into a temporary folder per session."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

NOTES: dict[str, str] = {
    "Sourdough starter.md": """---
title: Sourdough starter care
tags: [baking, food/bread]
aliases: [levain]
created: 2024-03-01
---
# Feeding

Feed the starter every day with equal weights of flour and water. A starter at
100% hydration doubles in four to six hours at room temperature.

# Storage

Keep the jar in the fridge between bakes and refresh it twice before baking.
See [[Budget#Groceries|the grocery budget]].
""",
    "Kubernetes.md": """---
tags:
  - devops
  - devops/k8s
---
# Rolling updates

A Deployment replaces pods gradually during a rolling update: maxSurge and
maxUnavailable bound how many pods are created or removed at a time.

## Rollback

`kubectl rollout undo deployment/web` returns to the previous ReplicaSet.
""",
    "gardening/Tomatoes.md": """---
tags: garden
---
# Growing tomatoes

Pinch out the side shoots (suckers) of cordon tomatoes and water the plants
deeply twice a week. ![[Compost#Ratio]]
""",
    "gardening/Compost.md": """# Compost

A healthy heap mixes green material with brown material. #garden #soil

## Ratio

Aim for roughly three parts brown (dry leaves, cardboard) to one part green
(kitchen scraps, grass clippings) and turn the heap every few weeks.
""",
    "finance/Budget.md": """---
title: Budget
tags: [money]
---
# Envelope method

Every month each euro of income gets a job: rent, savings, transport.

## Groceries

Groceries get 400 euros; flour for [[Sourdough starter]] is part of it.
""",
    "Broken frontmatter.md": """---
title: "Violin practice
tags: [music
---
# Scales

Practise three-octave scales slowly with a metronome before the etudes.
""",
}

JOURNAL: dict[str, tuple[str, datetime]] = {
    "2023-01-15.md": (
        "# Hiking\n\nWe crossed a glacier in the Alps and slept in a mountain hut.\n",
        datetime(2023, 1, 15, tzinfo=UTC),
    ),
    "2024-06-02.md": (
        "# Learning Rust\n\nThe borrow checker rejects two mutable references to the "
        "same value; ownership moves on assignment. #programming\n",
        datetime(2024, 6, 2, tzinfo=UTC),
    ),
}

NOTES_MTIME = datetime(2025, 5, 1, tzinfo=UTC)
BROKEN_FILES: dict[str, bytes] = {
    "invalid utf8.md": b"# Title\n\nCaf\xe9 au lait \xff\xfe\n",
    "binary.md": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
    "empty.md": b"",
}
IGNORED: dict[str, str] = {
    ".obsidian/workspace.md": "# should never be indexed: zebra-in-obsidian-folder\n",
    ".trash/old.md": "# deleted note: zebra-in-trash\n",
    "drafts/draft.tmp.md": "# excluded? no, only via config\n",
}


def write_sample_vault(root: Path) -> Path:
    """Write the vault under ``root`` (``notes/`` and ``journal/``); returns ``root``."""
    notes = root / "notes"
    for rel, text in NOTES.items():
        _write(notes / rel, text.encode("utf-8"), NOTES_MTIME)
    for rel, data in BROKEN_FILES.items():
        _write(notes / rel, data, NOTES_MTIME)
    for rel, text in IGNORED.items():
        _write(notes / rel, text.encode("utf-8"), NOTES_MTIME)
    for rel, (text, when) in JOURNAL.items():
        _write(root / "journal" / rel, text.encode("utf-8"), when)
    return root


def _write(path: Path, data: bytes, mtime: datetime) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    stamp = mtime.timestamp()
    os.utime(path, (stamp, stamp))
