"""The settings that shaped a run, and the history runs compare against."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rag_serving.config import RaglineConfig

from rag_serving.evaluation.self_eval.params import K
from rag_serving.evaluation.self_eval.scoring import ModeResult


def settings_of(config: RaglineConfig, index: dict[str, Any]) -> dict[str, Any]:
    """What shapes the results: the live vectors' model, the configured embedder,
    chunking and search (fusion) settings."""
    backends = {"query_backend", "document_backend"}
    return {
        "index_embedder": index.get("embedder"),
        "embedder": config.embedder.model_dump(mode="json", exclude_none=True, exclude=backends),
        "chunking": config.chunking.model_dump(mode="json", exclude_none=True),
        "search": config.search.model_dump(mode="json", exclude_none=True, exclude={"k", "mode"}),
    }


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def settings_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``name: old → new`` for each setting that differs."""
    old, new = _flatten(before), _flatten(after)
    return [
        f"{key}: {old.get(key)} → {new.get(key)}"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]


def read_history(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by an interrupted write
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def previous_run(history: list[dict[str, Any]], comparable: dict[str, Any]) -> dict | None:
    """The last run over the same query set, sources and limit."""
    for entry in reversed(history):
        if all(entry.get(k) == v for k, v in comparable.items()):
            return entry
    return None


def deltas(results: list[ModeResult], previous: dict[str, Any] | None) -> dict[str, Any]:
    """Per mode and split: the change of MRR@10 and hit@10 since ``previous``."""
    if previous is None:
        return {}
    out: dict[str, Any] = {}
    for result in results:
        before = (previous.get("results") or {}).get(result.mode)
        if not before:
            continue
        out[result.mode] = {
            split: {
                f"mrr@{K}": round(result.splits[split].mrr - before[split][f"mrr@{K}"], 6),
                f"hit@{K}": round(result.splits[split].hit - before[split][f"hit@{K}"], 6),
            }
            for split in ("heldout", "tuning")
            if split in before
        }
    return out


def append_history(path: Path, entry: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
