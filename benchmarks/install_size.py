"""A fresh default install of two revisions: its size on disk, its install time, its
packages, and a cold `ragline search` from it.

Each revision is checked out into a git worktree and installed with pip into a new
virtual environment, as `pip install <repository>` does for a user: no pip cache, and
for the new revision an empty ragline cache (its build fetches the bundled model).
A revision that pins torch gets PyTorch's CPU wheel first, from pip's configured
find-links folder, as the README told users to (an extra index); the CUDA build from
PyPI alone would be larger still. The cold search is `ragline search` in a fresh
process on a small vault indexed once by that environment.

    python benchmarks/install_size.py --old 8c01fe9 --new HEAD
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import REPO, save

PYTHON = "python3.11"
HEAVY = ("torch", "transformers", "sentence-transformers")
PROBE = """
import importlib.metadata, json
names = sorted(d.metadata["Name"].lower() for d in importlib.metadata.distributions())
print(json.dumps(names))
"""


def _size_mb(path: Path) -> int:
    out = subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def _torch_wheel() -> Path | None:
    links = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
        capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    wheels = [w for folder in links for w in Path(folder).glob("torch-*cpu*.whl")]
    return wheels[0] if wheels else None


def install(revision: str, work: Path) -> dict[str, object]:
    sha = subprocess.run(
        ["git", "rev-parse", "--short", revision], cwd=REPO, check=True, capture_output=True,
        text=True,
    ).stdout.strip()  # fmt: skip
    tree = work / f"tree-{sha}"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "-f", str(tree), sha], cwd=REPO, check=True,
        capture_output=True,
    )  # fmt: skip
    venv = work / f"venv-{sha}"
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "XDG_CACHE_HOME": str(work / f"cache-{sha}")}
    try:
        started = time.perf_counter()
        subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        pins_torch = "torch==" in (tree / "pyproject.toml").read_text()
        wheel = _torch_wheel()
        if pins_torch and wheel is not None:
            subprocess.run([*pip, str(wheel)], check=True, env=env)
        subprocess.run([*pip, str(tree)], check=True, env=env, cwd=work)
        seconds = time.perf_counter() - started
        names = json.loads(
            subprocess.run(
                [str(venv / "bin" / "python"), "-c", PROBE], check=True, capture_output=True,
                text=True, cwd=work,
            ).stdout
        )  # fmt: skip
        cold = _cold_search(venv, work / f"vault-{sha}")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO)
    heavy = [n for n in names if n in HEAVY or n.startswith(("nvidia-", "triton"))]
    return {
        "revision": sha,
        "install_s": round(seconds, 1),
        "size_mb": _size_mb(venv),
        "packages": len(names),
        "heavy_packages": heavy,
        "cold_search_s": cold,
    }


def _cold_search(venv: Path, folder: Path) -> float:
    """Median wall time of `ragline search` in a fresh process (3 runs), after one
    index of a 3-note vault by the same environment."""
    vault = folder / "vault"
    vault.mkdir(parents=True)
    (vault / "otters.md").write_text("# Otters\n\nSea otters hold hands while they sleep.\n")
    (vault / "bread.md").write_text("# Sourdough\n\nFeed the starter the evening before.\n")
    (vault / "backups.md").write_text("# Backups\n\nThree copies, two media, one off site.\n")
    ragline = str(venv / "bin" / "ragline")
    env = {k: v for k, v in os.environ.items() if k not in ("RAGLINE_CONFIG", "DAGSTER_HOME")}
    run = {"cwd": folder, "env": env, "check": True, "capture_output": True}
    subprocess.run([ragline, "init", "vault", "--output", "ragline.toml"], **run)
    subprocess.run([ragline, "--config", "ragline.toml", "index"], **run)
    times = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([ragline, "--config", "ragline.toml", "search", "otters", "--json"], **run)
        times.append(time.perf_counter() - started)
    return round(statistics.median(times), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", default="HEAD")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragline-install-"))
    old, new = install(args.old, work), install(args.new, work)
    rows = [
        ("install time (pip, no cache)", "install_s", "s"),
        ("environment on disk", "size_mb", "MB"),
        ("packages", "packages", ""),
        ("cold `ragline search` (median of 3)", "cold_search_s", "s"),
    ]
    lines = [
        f"| measure | `{old['revision']}` (before) | `{new['revision']}` (after) | after ÷ before |",
        "|---|---|---|---|",
    ]
    for label, key, unit in rows:
        a, b = float(old[key]), float(new[key])  # type: ignore[arg-type]
        lines.append(f"| {label} | {a:g} {unit} | {b:g} {unit} | **{b / a:.2f}** |")
    lines.append(
        f"| torch, transformers, nvidia-* in it | {', '.join(old['heavy_packages']) or 'none'} "  # type: ignore[arg-type]
        f"| {', '.join(new['heavy_packages']) or 'none'} | |"  # type: ignore[arg-type]
    )
    markdown = "\n".join([
        f"A fresh virtual environment ({PYTHON}) and `pip install <worktree>` of each "
        "revision, no pip cache (the before revision gets PyTorch's CPU wheel first, as "
        "its README said; the after revision's build fetches the bundled model into an "
        "empty cache). Downloads dominate the install time, so it depends on the network.",
        "",
        *lines,
    ])  # fmt: skip
    print(markdown)
    save(
        "install_size", {"before": old, "after": new}, markdown,
        f"python benchmarks/install_size.py --old {args.old} --new {args.new}",
    )  # fmt: skip


if __name__ == "__main__":
    main()
