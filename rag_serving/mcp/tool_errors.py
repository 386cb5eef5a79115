"""One-line messages for tool calls that fail: bad arguments, unknown tools, crashes.

The SDK reports arguments that fail validation as pydantic's multi-line text and a
crash as a bare "Error executing tool X". A model (and the person reading its
transcript) needs one line naming the argument, what it must be and what was given.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag_sources.kinds import kind_filters

# Names a caller may guess → the arguments they may mean, in order (a tool offers
# those it takes); each kind's filters add theirs (``from`` → ``senders``) below.
_ALIASES: dict[str, tuple[str, ...]] = {
    "limit": ("k",),
    "top_k": ("k",),
    "n": ("k",),
    "max_results": ("k",),
    "num_results": ("k",),
    "source": ("sources",),
    "kind": ("kinds",),
    "type": ("types",),
    "file_type": ("types",),
    "language": ("languages",),
    "lang": ("languages",),
    "tag": ("tags",),
    "author": ("authors",),
    "symbol": ("symbols",),
    "path": ("path_prefix",),
    "folder": ("path_prefix",),  # a folder of files (or a kind's folder: see below)
    "since": ("after",),
    "from_date": ("after",),
    "start_date": ("after",),
    "until": ("before",),
    "to_date": ("before",),
    "end_date": ("before",),
    "q": ("query",),
    "text": ("query",),
    "doc_id": ("id",),
    "chunk_id": ("id",),
    "heading": ("section",),
    "name": ("source",),
}


def _argument_aliases() -> dict[str, tuple[str, ...]]:
    aliases = dict(_ALIASES)
    for facet_filter in kind_filters():
        for alias in facet_filter.aliases:
            aliases[alias] = (facet_filter.name, *aliases.get(alias, ()))
    return aliases


ARGUMENT_ALIASES = _argument_aliases()
# An absolute path (or ~/…) in free text; not a URL's path, not "a/b" inside a word.
_PATH = re.compile(r"(?<![\w.:/~-])~?/[^\s'\"`,;()<>]*[^\s'\"`,;()<>.]")
MAX_VALUE_CHARS = 40
MAX_REASON_CHARS = 300


def one_line(text: str) -> str:
    """``text`` on one line (newlines and runs of blanks become one space)."""
    return " ".join(text.split())


def redact_paths(text: str, roots: Iterable[Path | str] = ()) -> str:
    """``text`` with server paths replaced by ``<path>`` (they are only shown to the
    local user): anything under ``roots`` (also without its leading slash, as Lance
    prints paths) and every other absolute path."""
    for root in sorted({str(r).rstrip("/") for r in roots if str(r).strip("/")}, key=len)[::-1]:
        # Lance drops the leading slash; a single bare name ("root") would match words.
        forms = (root, root.lstrip("/")) if "/" in root.lstrip("/") else (root,)
        for form in forms:
            text = re.sub(re.escape(form) + r"[^\s'\"`,;()<>]*", "<path>", text)
    return _PATH.sub("<path>", text)


def show_value(value: Any) -> str:
    """A short rendering of a value the caller sent."""
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            return f"{value[:MAX_VALUE_CHARS]!r}… ({len(value):,} characters)"
        return repr(value)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else f"{text[:MAX_VALUE_CHARS]}…"


def _bounds(prop: Mapping[str, Any], unit: str) -> str:
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None:
        return f"{unit} between {low:g} and {high:g}"
    if low is not None:
        return f"{unit} of at least {low:g}"
    if high is not None:
        return f"{unit} of at most {high:g}"
    return unit


def expected(prop: Mapping[str, Any]) -> str:
    """What an argument with JSON schema ``prop`` must be, in words."""
    options = [p for p in prop.get("anyOf", []) if p.get("type") != "null"]
    if len(options) == 1:
        prop = options[0]
    elif options:
        return " or ".join(expected(p) for p in options)
    if "enum" in prop:
        return "one of " + ", ".join(repr(v) for v in prop["enum"])
    kind = prop.get("type")
    if kind == "integer":
        return _bounds(prop, "an integer")
    if kind == "number":
        return _bounds(prop, "a number")
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        if prop.get("maxLength") is not None:
            return f"a string of at most {prop['maxLength']:,} characters"
        return "a string"
    if kind == "array":
        item = prop.get("items", {}).get("type")
        return f"a list of {item}s" if item else "a list"
    return "a valid value"


def argument_errors(
    tool: str, exc: ValidationError, schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> str:
    """One line for every argument of ``tool`` that failed validation."""
    properties = schema.get("properties", {})
    parts: list[str] = []
    seen: set[str] = set()
    for error in exc.errors():
        loc = error.get("loc") or ("?",)
        field = str(loc[0])
        if field in seen:
            continue
        seen.add(field)
        want = expected(properties.get(field, {}))
        if error.get("type") == "missing":
            parts.append(f"`{field}` is required ({want})")
        else:
            given = arguments[field] if field in arguments else error.get("input")
            parts.append(f"`{field}` must be {want}, got {show_value(given)}")
    return f"{tool}: " + "; ".join(parts)


def unknown_arguments(
    tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> str | None:
    """An error naming arguments ``tool`` does not take (None when all are known)."""
    known = list(schema.get("properties", {}))
    unknown = [name for name in arguments if name not in known]
    if not unknown:
        return None
    described = []
    for name in unknown:
        guesses = [g for g in ARGUMENT_ALIASES.get(name, ()) if g in known]
        if not guesses:
            guesses = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        meant = " or ".join(f"`{g}`" for g in guesses)
        described.append(f"`{name}` (did you mean {meant}?)" if guesses else f"`{name}`")
    takes = f"it takes: {', '.join(known)}" if known else "it takes no arguments"
    noun = "argument" if len(unknown) == 1 else "arguments"
    return f"{tool}: unknown {noun} {', '.join(described)}; {takes}"


def unknown_tool(name: str, tools: list[str]) -> str:
    close = difflib.get_close_matches(name, tools, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return f"unknown tool {name!r}{hint} (tools: {', '.join(tools)})"


def crash_reason(exc: BaseException, *, local: bool, roots: Iterable[Path | str] = ()) -> str:
    """``internal error (Type: first line)`` for an exception ragline did not expect;
    paths are hidden from callers other than the local user."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = lines[0] if lines else ""
    if not local:
        detail = redact_paths(detail, roots)
    if len(detail) > MAX_REASON_CHARS:
        detail = detail[:MAX_REASON_CHARS] + "…"
    kind = type(exc).__name__
    reason = f"{kind}: {detail}" if detail else kind
    return f"internal error ({reason}); the server's log has the traceback"
