"""Whether ragline's default dependencies install from PyPI alone, as wheels, on each
platform and Python it supports — and that none of them is PyTorch, transformers or
an NVIDIA library.

For each platform (Linux x86_64 and aarch64, macOS arm64 and x86_64) and Python
(3.11-3.13), pip resolves ``[project] dependencies`` of pyproject.toml for that target
(``pip install --dry-run --only-binary=:all: --platform ... --python-version ...``)
against PyPI's index only: no pip configuration, no local wheels, no extra index URL —
what a user's ``pipx``/``pip``/``uv`` sees. Only wheels are allowed, so a package that
would need a compiler on that machine fails the check. pip reads each wheel's metadata
from the index (PEP 658) without downloading the wheels. Linux is also installed and
run for real by CI (`make check-packaging`); macOS cannot run here, so this is the
check that a Mac's install resolves.

    python benchmarks/install_platforms.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.report import REPO, save

PYTHONS = ("3.11", "3.12", "3.13")
MANYLINUX = [f"manylinux_2_{minor}" for minor in range(28, 16, -1)] + ["manylinux2014"]
# pip widens a macOS tag to the older releases and universal2 builds; manylinux tags
# are listed one by one.
PLATFORMS = {
    "Linux x86_64": [f"{tag}_x86_64" for tag in MANYLINUX],
    "Linux aarch64": [f"{tag}_aarch64" for tag in MANYLINUX],
    "macOS arm64 (14)": ["macosx_14_0_arm64"],
    "macOS x86_64 (13)": ["macosx_13_0_x86_64"],
}
# LanceDB publishes no Intel-Mac wheel since 0.26 (lancedb PR #2836; setup.py says so
# at build): that target is expected to fail on lancedb, and the check notices if it
# stops failing.
UNSUPPORTED = {"macOS x86_64 (13)": "lancedb"}
HEAVY = ("torch", "transformers", "sentence-transformers")
WATCHED = ("onnxruntime", "lancedb", "pyarrow", "pymupdf", "tokenizers")


def dependencies() -> list[str]:
    with (REPO / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)["project"]["dependencies"]


def resolve(platforms: list[str], python: str, requirements: Path, work: Path) -> dict:
    """pip's resolution for one target: the wheels it picked, or its error."""
    report = work / "report.json"
    report.unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "pip", "install", "--isolated", "--quiet", "--dry-run",
        "--ignore-installed", "--only-binary=:all:", "--implementation", "cp",
        "--python-version", python, "--index-url", "https://pypi.org/simple",
        "--target", str(work / "target"), "--report", str(report), "-r", str(requirements),
    ]  # fmt: skip
    for platform in platforms:
        command += ["--platform", platform]
    if os.environ.get("PIP_CERT"):  # --isolated ignores PIP_*: keep the machine's CA file
        command += ["--cert", os.environ["PIP_CERT"]]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
        return {"ok": False, "error": (errors or done.stderr.splitlines() or ["?"])[0]}
    items = json.loads(report.read_text())["install"]
    names = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in items}
    files = [item["download_info"]["url"].rsplit("/", 1)[1] for item in items]
    return {
        "ok": True,
        "packages": len(names),
        "all_wheels": all(name.endswith(".whl") for name in files),
        "heavy": sorted(n for n in names if n in HEAVY or n.startswith(("nvidia-", "triton"))),
        "versions": {name: names.get(name, "-") for name in WATCHED},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragline-platforms-"))
    requirements = work / "requirements.txt"
    requirements.write_text("\n".join(dependencies()) + "\n")
    rows, results = [], []
    for label, platforms in PLATFORMS.items():
        for python in PYTHONS:
            result = {"platform": label, "python": python,
                      **resolve(platforms, python, requirements, work)}  # fmt: skip
            results.append(result)
            print(json.dumps(result), flush=True)
            if result["ok"]:
                versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items())
                heavy = ", ".join(result["heavy"]) or "none"
                wheels = "yes" if result["all_wheels"] else "**no**"
                rows.append(f"| {label} | {python} | yes | {result['packages']} | {wheels} "
                            f"| {heavy} | {versions} |")  # fmt: skip
            else:
                error = result["error"].split(" (from versions:")[0]
                rows.append(f"| {label} | {python} | **no**: {error} | | | | |")
    markdown = "\n".join([
        "pip's resolution of the default dependencies for each target, against PyPI "
        "alone (no pip configuration, no local wheels, no extra index URL), wheels only. "
        "Linux x86_64 is also installed and run by CI (`make check-packaging`, pipx and "
        "uv); macOS is resolved here, not run. Intel Macs cannot install ragline: LanceDB "
        "publishes no macOS x86_64 wheel since 0.26 (lancedb PR #2836), and a build there "
        "stops with a line saying so (setup.py).",
        "",
        "| platform | Python | resolves, wheels only | packages | every one a wheel "
        "| torch, transformers, nvidia-* | versions picked |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ])  # fmt: skip
    print(markdown)
    save("install_platforms", {"targets": results}, markdown,
         "python benchmarks/install_platforms.py")  # fmt: skip
    failed = [r for r in results if not _as_expected(r)]
    for result in failed:
        print(f"unexpected: {result['platform']} Python {result['python']}: {result}")
    sys.exit(1 if failed else 0)


def _as_expected(result: dict) -> bool:
    blocker = UNSUPPORTED.get(result["platform"])
    if blocker is not None:
        return not result["ok"] and blocker in result["error"]
    return result["ok"] and result["all_wheels"] and not result["heavy"]


if __name__ == "__main__":
    main()
