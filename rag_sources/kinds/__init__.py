"""The source kinds, one folder each, found through one registry.

A kind is a folder ``rag_sources/kinds/<kind>/`` (or a package of its own) whose
``KIND`` is a ``KindInfo``: its ``[[sources]]`` config model (light to import: the
CLI, search and status validate configs with it) and where its ``SourceKind`` is
(imported only to index). The built-in kinds are listed here; an installed package
adds one through the ``ragline.kinds`` entry-point group, as simonw/llm loads its
plugins:

    [project.entry-points."ragline.kinds"]
    jsonl = "ragline_jsonl:KIND"

docs/adding-a-kind.md walks through writing one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from rag_sources.config import FileSourceConfig, kind_name
from rag_sources.errors import ConfigError
from rag_sources.filters import CORE_FILTER_NAMES, FacetFilter
from rag_sources.hits import CORE_HIT_FIELDS, Byline, HitDetail
from rag_sources.relations import RESERVED_NAMES, Relation

if TYPE_CHECKING:
    from rag_sources.kinds.base import SourceKind

ENTRY_POINT_GROUP = "ragline.kinds"
# The built-in kinds' folders, in the order `ragline init --kind` offers them.
_BUILT_IN = ("markdown", "documents", "git", "mail", "feeds", "calibre")


@dataclass(frozen=True)
class KindInfo:
    """A kind as the registry knows it."""

    config: type[FileSourceConfig]  # its [[sources]] model, with `kind: Literal["<name>"]`
    implementation: str  # "module:Class" of its SourceKind
    package: str = "ragline"  # the distribution that provides it, for messages
    relations: tuple[Relation, ...] = ()  # the lists it adds to MCP `neighbors`
    filters: tuple[FacetFilter, ...] = ()  # the search filters it adds (`--from`…)
    hit_details: tuple[HitDetail, ...] = ()  # fields it adds to hits (`folder`…)
    byline: Byline | None = None  # its hits' line in `ragline search` (who, when, where)
    # File types whose items record changes rather than hold content (git's "commit"):
    # search lifts them for "when / why did … change" questions, code for the others.
    history_types: tuple[str, ...] = ()
    # Whether its documents are also searched as one text (whole-document BM25): not
    # for code files and commits, whose parts answer on their own.
    whole_documents: bool = True

    @property
    def name(self) -> str:
        return kind_name(self.config)

    def load(self) -> type[SourceKind]:
        """The kind's ``SourceKind`` class (imports the readers it needs)."""
        module, _, attribute = self.implementation.partition(":")
        return getattr(importlib.import_module(module), attribute)


@cache
def _registry() -> tuple[dict[str, KindInfo], tuple[str, ...]]:
    kinds: dict[str, KindInfo] = {}
    problems: list[str] = []
    for folder in _BUILT_IN:
        info = importlib.import_module(f"{__name__}.{folder}").KIND
        kinds[info.name] = info
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        package = entry.dist.name if entry.dist is not None else entry.value
        try:
            info = entry.load()
        except Exception as exc:
            problems.append(
                f"the source kind {entry.name!r} of the package {package!r} does not load "
                f"({type(exc).__name__}: {exc}); reinstall or uninstall that package"
            )
            continue
        if not isinstance(info, KindInfo):
            problems.append(
                f"the package {package!r} declares {entry.value!r} as a ragline kind, but it "
                "is not a rag_sources.kinds.KindInfo"
            )
        elif info.name in kinds:
            problems.append(
                f"the package {package!r} declares the source kind {info.name!r}, which "
                f"{kinds[info.name].package!r} already has; uninstall one of them"
            )
        elif clash := _name_clash(info, kinds.values()):
            problems.append(f"the package {package!r} {clash}; uninstall it or rename it")
        else:
            kinds[info.name] = replace(info, package=package)
    return kinds, tuple(problems)


# What a kind adds under a name of its own: (what it is, its names, the names taken
# by ragline itself).
_NAMED: tuple[tuple[str, Callable[[KindInfo], Iterable[str]], frozenset[str]], ...] = (
    ("a `neighbors` list", lambda i: (r.name for r in i.relations), RESERVED_NAMES),
    ("a search filter", lambda i: (n for f in i.filters for n in (f.name, f.option)),
     CORE_FILTER_NAMES),
    ("a hit field", lambda i: (d.name for d in i.hit_details), CORE_HIT_FIELDS),
)  # fmt: skip


def _name_clash(info: KindInfo, known: Iterable[KindInfo]) -> str | None:
    """Why a name ``info`` adds (a filter, a hit field, a `neighbors` list) cannot join
    those of ragline and of the ``known`` kinds, or None."""
    known = list(known)
    for what, names_of, own in _NAMED:
        taken = {name: other.name for other in known for name in names_of(other)}
        for name in names_of(info):
            if name in own:
                return f"adds {what} {name!r}, which is one of ragline's own"
            if name in taken:
                return f"adds {what} {name!r}, which the kind {taken[name]!r} already has"
    return None


def registered_kinds() -> dict[str, KindInfo]:
    """Every kind by name: the built-in ones, then those of installed packages (a
    package whose kind is broken is left out: ``check_registered_kinds`` says why)."""
    return _registry()[0]


def check_registered_kinds() -> None:
    """Raise ``ConfigError`` naming an installed package whose kind does not load, is
    not a ``KindInfo`` or takes a name already taken (loading a config calls it, so
    every command refuses to run with one line, before anything runs)."""
    problems = _registry()[1]
    if problems:
        raise ConfigError(problems[0])


def kind_filters() -> list[FacetFilter]:
    """Every registered kind's search filters."""
    return [f for info in registered_kinds().values() for f in info.filters]


def kind_hit_details() -> list[HitDetail]:
    """Every registered kind's hit details."""
    return [d for info in registered_kinds().values() for d in info.hit_details]


def kind_history_types() -> list[str]:
    """Every registered kind's file types that record changes."""
    return [t for info in registered_kinds().values() for t in info.history_types]


def kinds_without_whole_documents() -> frozenset[str]:
    """The registered kinds whose documents are not searched as one text."""
    return frozenset(name for name, info in registered_kinds().items() if not info.whole_documents)


def kind_relations() -> list[Relation]:
    """Every registered kind's ``neighbors`` relations."""
    return [relation for info in registered_kinds().values() for relation in info.relations]


def kind_info(name: str) -> KindInfo:
    """The registered kind called ``name``."""
    kinds = registered_kinds()
    if name not in kinds:
        raise ConfigError(
            f"unknown source kind {name!r}; known: {', '.join(kinds)} (a kind from a "
            "package needs that package installed)"
        )
    return kinds[name]
