"""Stages, status, search, MCP, config and the CLI never name a source kind: only a
kind's own folder (``rag_sources/kinds/<kind>/``) and the registry do. A branch on
a kind name (``kind == "mail"``), a test of a kind's config class
(``isinstance(source, GitSourceConfig)``), a list of kinds or an import of one kind's
modules anywhere else is a kind living in two places (issue 28)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from rag_sources.kinds import registered_kinds

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ragline", "rag_assets", "rag_serving", "rag_sources")
KINDS_FOLDER = REPO / "rag_sources" / "kinds"


def _kind_constants(node: ast.AST, kinds: set[str]) -> list[str]:
    if isinstance(node, ast.Constant) and node.value in kinds:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [name for element in node.elts for name in _kind_constants(element, kinds)]
    return []


def kind_names_in(source: str, kinds: set[str], config_classes: set[str]) -> list[tuple[int, str]]:
    """(line, what) for each place ``source`` names a kind."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for part in (node.left, *node.comparators):
                found += [
                    (node.lineno, f"compares with {n!r}") for n in _kind_constants(part, kinds)
                ]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            names = _kind_constants(node, kinds)
            if len(names) >= 2:
                found.append((node.lineno, f"lists kinds {names}"))
        elif isinstance(node, ast.Dict):
            keys = [k for key in node.keys if key is not None for k in _kind_constants(key, kinds)]
            if len(keys) >= 2:
                found.append((node.lineno, f"maps kinds {keys}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            classes = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            found += [
                (node.lineno, f"isinstance of {c.id}")
                for c in classes
                if isinstance(c, ast.Name) and c.id in config_classes
            ]
    return sorted(set(found))


def _registry() -> tuple[set[str], set[str]]:
    kinds = registered_kinds()
    return set(kinds), {info.config.__name__ for info in kinds.values()}


def _outside_the_kinds() -> Iterator[tuple[Path, str]]:
    """(path from the repository, source) of every module outside the kinds' folders."""
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if not path.is_relative_to(KINDS_FOLDER):
                yield path.relative_to(REPO), path.read_text(encoding="utf-8")


def test_no_kind_is_named_outside_its_folder() -> None:
    kinds, config_classes = _registry()
    offenders = [
        f"{path}:{line}: {what}"
        for path, source in _outside_the_kinds()
        for line, what in kind_names_in(source, kinds, config_classes)
    ]
    assert not offenders, "\n".join(offenders)


def kind_imports_in(source: str, kinds: set[str]) -> list[tuple[int, str]]:
    """(line, module) for each import of one kind's folder (``rag_sources.kinds.mail…``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        modules = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        for module in modules:
            parts = module.split(".")
            if parts[:2] == ["rag_sources", "kinds"] and len(parts) > 2 and parts[2] in kinds:
                found.append((node.lineno, module))
    return found


def test_no_module_outside_the_kinds_imports_one_kind() -> None:
    """Everything else reaches a kind through the registry, never by its module."""
    kinds, _ = _registry()
    offenders = [
        f"{path}:{line}: imports {module}"
        for path, source in _outside_the_kinds()
        for line, module in kind_imports_in(source, kinds)
    ]
    assert not offenders, "\n".join(offenders)
    assert kind_imports_in(
        "from rag_sources.kinds.git.keys import COMMIT_KEY_PREFIX\n"
        "import rag_sources.kinds.mail.thread\n"
        "from rag_sources.kinds import registered_kinds\n",
        kinds,
    ) == [(1, "rag_sources.kinds.git.keys"), (2, "rag_sources.kinds.mail.thread")]


def test_the_rule_sees_each_way_of_naming_a_kind() -> None:
    """The check itself fails on each form it looks for (and passes what is not one)."""
    kinds, config_classes = _registry()
    named = kind_names_in(
        "if source.kind == 'mail':\n    pass\n"
        "LISTED = ('mail', 'feeds')\n"
        "BLOCKS = {'git': 1, 'calibre': 2}\n"
        "ok = isinstance(source, GitSourceConfig)\n"
        "table = 'chunks'\n",
        kinds,
        config_classes,
    )
    assert [line for line, _ in named] == [1, 3, 4, 5]
