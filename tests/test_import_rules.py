"""Imports only look down (the import-linter contracts in pyproject.toml), and
rag_serving never imports dagster or rag_assets, so search and MCP start fast."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = ("dagster", "rag_assets")


def test_no_forbidden_import_statements_in_rag_serving() -> None:
    offenders = []
    for path in (REPO / "rag_serving").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path}:{node.lineno} {n}" for n in names if n.split(".")[0] in FORBIDDEN
            ]
    assert not offenders


def test_search_path_loads_without_dagster_or_torch() -> None:
    code = (
        "import sys, rag_serving.search, rag_serving.status, rag_serving.config, "
        "rag_serving.embedders.sentence_transformers, rag_serving.embedders.ollama, ragline.cli;"
        "bad = [m for m in ('dagster', 'rag_assets', 'torch', 'sentence_transformers') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _lint_imports(*config: str) -> subprocess.CompletedProcess[str]:
    linter = Path(sys.executable).with_name("lint-imports")
    assert linter.exists(), "import-linter is a dev dependency (scripts/setup.sh --dev)"
    return subprocess.run(
        [str(linter), "--no-cache", *config], capture_output=True, text=True, cwd=REPO
    )


def test_the_layer_contracts_hold() -> None:
    checked = _lint_imports()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "0 broken" in checked.stdout


def test_an_import_that_looks_up_breaks_a_contract(tmp_path: Path) -> None:
    """The same check with the layers upside down must fail, naming an import: the
    contracts are evaluated, not passed vacuously."""
    upside_down = tmp_path / "contracts.toml"
    upside_down.write_text(
        "[tool.importlinter]\n"
        'root_packages = ["ragline", "rag_assets", "rag_serving"]\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "upside down"\n'
        'type = "layers"\n'
        'layers = ["rag_serving", "rag_assets", "ragline"]\n'
    )
    checked = _lint_imports(str(upside_down))
    assert checked.returncode == 1, checked.stdout
    assert "upside down BROKEN" in checked.stdout
    assert "rag_assets.resources -> rag_serving.config" in checked.stdout
