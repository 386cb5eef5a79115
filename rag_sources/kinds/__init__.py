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
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from rag_sources.config import FileSourceConfig, kind_name
from rag_sources.errors import ConfigError

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
        else:
            kinds[info.name] = KindInfo(info.config, info.implementation, package)
    return kinds, tuple(problems)


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


def kind_info(name: str) -> KindInfo:
    """The registered kind called ``name``."""
    kinds = registered_kinds()
    if name not in kinds:
        raise ConfigError(
            f"unknown source kind {name!r}; known: {', '.join(kinds)} (a kind from a "
            "package needs that package installed)"
        )
    return kinds[name]
