"""What a query asks of a repository, and the ranking that follows from it.

Three heuristics, each switchable (``[search.code]``), measured on the requests
code-search set (benchmarks/code_search.py):

- **intent**: an identifier (``merge_environment_settings``, ``Session.send``) asks
  for code, and lifts it; a "where / how is … done" question asks for code too, but
  may be about a note: it lowers history instead; a "when / why did … change"
  question asks for history, and lifts it. Among the top fused hits only.
- **tests below code**: a chunk of a test file is lowered unless the query speaks of
  tests, so the code a test exercises ranks above it.
- **symbol lines**: a hit in a chunk that groups several small definitions reports
  the lines of the definition that matches the query, not the whole group's.

A chunk's role comes from fields the index already has, never from its source's
kind: code is a chunk with a ``language`` facet, history a chunk whose file type a
kind declares as a record of changes (``KindInfo.history_types``), a test a code
chunk whose path looks like a test's.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

from rag_sources.code import CodeSymbol, code_symbols
from rag_sources.kinds import kind_history_types

Intent = Literal["code", "history", "none"]
Role = Literal["code", "test", "history", "other"]

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
# One name as code writes it: snake_case, camelCase / PascalCase, dotted, or called.
_IDENTIFIER = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:\(\))?$")
_HISTORY_OPENERS = ("when", "why", "who")
_HISTORY_PHRASES = re.compile(
    r"\b(?:which|what) (?:commit|change|release|version)s?\b|\bwhat changed\b|\bcommits?\b"
    r"|\bchangelog\b|\bregression\b"
)
_CODE_OPENERS = ("where", "how", "which", "what", "find", "show")
_TEST_WORDS = re.compile(r"\b(?:tests?|testing|tested|unittests?|pytest|fixtures?|specs?)\b", re.I)
# A test file by its path: a tests/ folder, test_x.py, x_test.go, x.spec.ts, conftest.py.
_TEST_PATH = re.compile(
    r"(?:^|/)(?:tests?|testing|__tests__|spec)/|(?:^|/)test_[^/]*$|_tests?\.[^/.]+$"
    r"|\.(?:test|spec)\.[^/.]+$|(?:^|/)conftest\.py$",
    re.I,
)
_STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "done", "for",
    "from", "how", "in", "into", "is", "it", "its", "of", "on", "or", "the", "to", "was",
    "were", "what", "when", "where", "which", "who", "why", "with", "handled", "happen",
})  # fmt: skip


def query_intent(query: str) -> Intent:
    """What ``query`` asks for: ``code`` (an identifier, or a where/how question),
    ``history`` (a when/why question, or one about commits), else ``none``."""
    tokens = query.split()
    if not tokens:
        return "none"
    lowered = " ".join(tokens).lower()
    if tokens[0].lower() in _HISTORY_OPENERS or _HISTORY_PHRASES.search(lowered):
        return "history"
    if tokens[0].lower() in _CODE_OPENERS:
        return "code"
    # a name or two as code writes them (`merge_environment_settings`, `Session.send`)
    if len(tokens) <= 3 and all(_IDENTIFIER.match(t) for t in tokens):
        return "code" if any(_looks_like_code(t) for t in tokens) else "none"
    return "none"


def _looks_like_code(token: str) -> bool:
    """A token no prose word looks like: ``a_b``, ``aB``, ``A.b``, ``f()``."""
    name = token.removesuffix("()")
    return (
        token.endswith("()")
        or "_" in name.strip("_")
        or "." in name
        or bool(re.search(r"[a-z][A-Z]", name))
    )


def query_identifiers(query: str) -> tuple[str, ...]:
    """The names in ``query`` written as code writes them (``super_len``,
    ``Session.send``, ``raise_for_status()``), without call parentheses."""
    tokens = [t.strip(",;:?!'\"`") for t in query.split()]
    return tuple(
        t.removesuffix("()") for t in tokens if _IDENTIFIER.match(t) and _looks_like_code(t)
    )


def asks_for_tests(query: str) -> bool:
    """Whether ``query`` speaks of tests (then they keep their place)."""
    return bool(_TEST_WORDS.search(query))


def is_test_path(path: str) -> bool:
    """Whether ``path`` is a test's: in a tests/ folder, or named as tests are."""
    return bool(_TEST_PATH.search(path))


@cache
def _history_types() -> frozenset[str]:
    return frozenset(kind_history_types())


def chunk_role(path: str, facets: Iterable[str] | None) -> Role:
    """A chunk's role from its path and facets (see the module's docstring)."""
    language = file_type = None
    for facet in facets or ():
        name, _, value = facet.partition(":")
        if name == "language" and language is None:
            language = value
        elif name == "type" and file_type is None:
            file_type = value
    if file_type in _history_types():
        return "history"
    if language is not None:
        return "test" if is_test_path(path) else "code"
    return "other"


@dataclass(frozen=True)
class RolePriors:
    """How far each role moves, in standard deviations of the candidates' scores."""

    prefer: float  # the role the query asks for (code or history)
    tests: float  # a test chunk, when the query does not speak of tests


def role_shifts(
    query: str,
    roles: Sequence[Role],
    defines: Sequence[bool],
    priors: RolePriors,
    intent_on: bool,
    tests_on: bool,
) -> list[float]:
    """Per candidate, in spreads of the candidates' scores: + ``prefer`` for the role
    the query's intent asks for (for a code question in words: − ``prefer`` for
    history instead), and again for a chunk that ``defines`` a name the query writes
    as code; − ``tests`` for a test chunk unless tests are asked for (a history
    question leaves tests where they are: they are no answer to it)."""
    intent = query_intent(query) if intent_on else "none"
    lower_tests = tests_on and intent != "history" and not asks_for_tests(query)
    # A question in words ("how is … done") may be about a note as well as about code:
    # it moves commits down rather than code up, so notes and documents keep their
    # place beside the code. A name written as code asks for code alone.
    named = bool(query_identifiers(query))
    shifts = []
    for role, defining in zip(roles, defines, strict=True):
        shift = 0.0
        asked = "code" if role == "test" else role
        if intent == "code" and not named:
            if role == "history":
                shift -= priors.prefer
        elif asked == intent:
            shift += priors.prefer
            if defining and intent == "code":
                shift += priors.prefer
        if lower_tests and role == "test":
            shift -= priors.tests
        shifts.append(shift)
    return shifts


def spread(scores: Sequence[float]) -> float:
    """The standard deviation of ``scores`` (1 when they are all equal or too few)."""
    if len(scores) < 2:
        return 1.0
    mean = sum(scores) / len(scores)
    sd = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
    return sd if sd > 0 else 1.0


# ---- the matching definition's own lines ---------------------------------------


@dataclass(frozen=True)
class SymbolLines:
    """A definition inside a chunk: its (qualified) name and 1-based file lines."""

    name: str
    line_start: int
    line_end: int


def _terms(text: str) -> list[str]:
    """Lowercase word parts: ``merge_environment_settings`` → merge, environment,
    settings; ``ConnectTimeout`` → connect, timeout."""
    out = []
    for word in _WORD.findall(text):
        for part in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", word):
            out.append(part.lower())
    return out


def _alike(term: str, other: str) -> bool:
    """The same word, or two forms of one (connect / connecting, times / timeout):
    a common start of four letters or more, most of the shorter word."""
    if term == other:
        return True
    common = 0
    for a, b in zip(term, other, strict=False):
        if a != b:
            break
        common += 1
    return common >= 4 and common >= 0.6 * min(len(term), len(other))


def _shared(asked: Sequence[str], terms: set[str]) -> int:
    """How many of the query's words are among ``terms`` (in some form)."""
    return sum(1 for t in asked if t in terms or any(_alike(t, u) for u in terms))


def symbol_lines(
    query: str,
    text: str,
    language: str | None,
    line_start: int,
    qualified: Sequence[str] = (),
    wanted: str | None = None,
) -> SymbolLines | None:
    """The definition inside a chunk's ``text`` (file lines from ``line_start``) that
    ``query`` matches, when the chunk holds several: ``wanted`` (a symbol the search
    was filtered on) if it is one of them, else the one whose name, then text, shares
    most of the query's words (the shorter on a tie). None when the chunk holds fewer
    than two definitions, or no word of the query is in any of them; ``qualified`` are
    the chunk's symbol facets, to name a method with its class."""
    if language is None:
        return None
    symbols = code_symbols(textwrap.dedent(text), language, line_start)
    if len(symbols) < 2:
        return None
    lines = text.split("\n")

    def full_name(name: str) -> str:
        return next((q for q in qualified if q == name or q.endswith("." + name)), name)

    if wanted is not None:
        for s in symbols:
            if s.qualified_name == wanted or full_name(s.name) == wanted or s.name == wanted:
                return SymbolLines(full_name(s.qualified_name), s.line_start, s.line_end)
    asked = sorted({t for t in _terms(query) if t not in _STOP and len(t) > 1})
    if not asked:
        return None
    best: tuple[int, int, CodeSymbol] | None = None
    for s in symbols:
        body = "\n".join(lines[s.line_start - line_start : s.line_end - line_start + 1])
        score = 3 * _shared(asked, set(_terms(s.name))) + _shared(asked, set(_terms(body)))
        size = s.line_end - s.line_start
        if score > 0 and (best is None or (score, -size) > (best[0], -best[1])):
            best = (score, size, s)
    if best is None:
        return None
    found = best[2]
    return SymbolLines(full_name(found.qualified_name), found.line_start, found.line_end)
