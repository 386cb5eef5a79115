"""Close-match suggestions for names a user mistyped."""

from __future__ import annotations

from collections.abc import Iterable

from rapidfuzz import fuzz, process


def close_matches(name: str, candidates: Iterable[str], limit: int = 3) -> list[str]:
    """Up to ``limit`` candidates that look like ``name``, best first."""
    choices = sorted(set(candidates))
    found = process.extract(name, choices, scorer=fuzz.WRatio, limit=limit, score_cutoff=60)
    return [match for match, _score, _index in found]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A phrase to append to an error: close matches, or the known names."""
    choices = sorted(set(candidates))
    matches = close_matches(name, choices)
    if matches:
        return "; did you mean " + ", ".join(repr(m) for m in matches) + "?"
    if not choices:
        return "; none are known"
    shown = ", ".join(repr(c) for c in choices[:10])
    more = f" (and {len(choices) - 10} more)" if len(choices) > 10 else ""
    return f"; known: {shown}{more}"
