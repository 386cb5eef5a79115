"""LanceDB's x86_64 wheel needs AVX2 and FMA; on an older processor importing it kills
the process with SIGILL. ragline asks the processor first and says what to install.
The real case runs the venv's Python on QEMU's emulated Nehalem (no AVX2, no FMA)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rag_serving.config import RaglineConfig
from rag_serving.index.cpu import missing_cpu_features, unsupported_cpu_message
from ragline.cli import cli

REPO = Path(__file__).resolve().parents[1]
OLD_CPU = "Nehalem"  # 2008: SSE4.2, no AVX


@pytest.mark.parametrize(
    ("machine", "features", "distribution", "missing"),
    [
        ("x86_64", {"AVX2": False, "FMA3": False}, "lancedb", ["AVX2", "FMA"]),
        ("x86_64", {"AVX2": True, "FMA3": False}, "lancedb", ["FMA"]),
        ("x86_64", {"AVX2": True, "FMA3": True}, "lancedb", []),
        ("x86_64", {"AVX2": False, "FMA3": False}, "lancedb-compat", []),  # its own build
        ("AMD64", {"AVX2": False, "FMA3": True}, "lancedb", ["AVX2"]),
        ("aarch64", {}, "lancedb", []),  # the check is for x86_64's wheel
        ("x86_64", {}, "lancedb", []),  # NumPy could not tell: loaded as is
    ],
)
def test_missing_cpu_features(
    machine: str, features: dict[str, bool], distribution: str, missing: list[str]
) -> None:
    assert missing_cpu_features(machine, features, distribution) == missing


def test_the_message_is_one_line_naming_the_build_to_install() -> None:
    message = unsupported_cpu_message(["AVX2", "FMA"], "0.40.0")
    assert "\n" not in message
    assert message.startswith("this processor has no AVX2 or FMA")
    assert "pip install --no-deps --force-reinstall lancedb-compat==0.40.0" in message
    assert "pipx runpip ragline install --no-deps --force-reinstall" in message


def _emulated(code: str, cpu: str = OLD_CPU) -> subprocess.CompletedProcess[str]:
    qemu = shutil.which("qemu-x86_64")
    assert qemu, "the emulated processor needs qemu-x86_64: sudo apt-get install qemu-user"
    return subprocess.run(
        [qemu, "-cpu", cpu, sys.executable, "-c", code],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip


def test_on_a_processor_without_avx2_lancedb_crashes_and_ragline_says_why(
    sample_index: RaglineConfig,
) -> None:
    # Why the check exists: LanceDB's own import dies of SIGILL there, no Python error.
    crashed = _emulated("import lancedb")
    assert crashed.returncode in (132, -4), crashed  # 128 + SIGILL, or killed by it
    opened = _emulated(
        "from rag_serving.index.store import IndexStore\n"
        f"IndexStore({str(sample_index.data_dir)!r})"
    )
    assert opened.returncode == 1, opened
    last = opened.stderr.strip().splitlines()[-1]
    assert last.startswith("rag_sources.errors.UnsupportedCpuError: this processor has no AVX2")
    # A processor with them (Haswell, 2013) opens the same index.
    assert _emulated(opened.args[-1], cpu="Haswell").returncode == 0


def test_the_cli_prints_the_one_line_error_on_an_old_processor(
    sample_index: RaglineConfig,
) -> None:
    config = str(sample_index.config_path)
    searched = _emulated(
        "import sys\nfrom ragline.cli import main\n"
        f"sys.argv = ['ragline', '--config', {config!r}, 'search', 'glacier']\nmain()"
    )
    assert searched.returncode == 1, searched
    errors = [line for line in searched.stderr.splitlines() if "TCG doesn't" not in line]
    assert " ".join(" ".join(errors).split()).startswith(
        "error: this processor has no AVX2 or FMA"
    ), errors
    # The same search on this machine's own processor works.
    result = CliRunner().invoke(cli, ["--config", config, "search", "glacier", "-k", "1"])
    assert result.exit_code == 0, result.output
