"""rag_serving never imports dagster or rag_assets, so search and MCP start fast."""

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
