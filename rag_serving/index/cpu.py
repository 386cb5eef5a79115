"""Whether this processor can load LanceDB's compiled library.

LanceDB's x86_64 wheel is built for AVX2 and FMA (Intel Haswell, AMD Excavator and
later): on an older processor ``import lancedb`` kills the process with SIGILL before
Python can say why. LanceDB publishes the same release built for older processors as
``lancedb-compat`` (lancedb PR #3327), whose files go over lancedb's. So the processor
is asked first, through NumPy's CPUID probe (which, unlike /proc/cpuinfo, sees what an
emulator presents: checked under QEMU's Nehalem model, docs/decisions.md).
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Mapping

from rag_sources.errors import UnsupportedCpuError

# NumPy's name for each feature LanceDB's x86_64 wheel needs, and the usual name.
NEEDED_FEATURES = {"AVX2": "AVX2", "FMA3": "FMA"}
COMPAT_DISTRIBUTION = "lancedb-compat"
_checked = False


def missing_cpu_features(
    machine: str, features: Mapping[str, bool], distribution: str
) -> list[str]:
    """The features the installed LanceDB build (``distribution``) needs that this
    processor (``machine``, NumPy's ``features``) lacks."""
    if machine.lower() not in ("x86_64", "amd64") or distribution == COMPAT_DISTRIBUTION:
        return []
    return [name for key, name in NEEDED_FEATURES.items() if features.get(key) is False]


def unsupported_cpu_message(missing: list[str], version: str) -> str:
    # Over lancedb, not instead of it: lancedb-compat alone cannot be imported, as its
    # module asks for the "lancedb" distribution's version (lancedb issue #3950).
    command = f"install --no-deps --force-reinstall {COMPAT_DISTRIBUTION}=={version}"
    return (
        f"this processor has no {' or '.join(missing)}, which LanceDB's x86_64 build needs "
        "(loading it would crash); put LanceDB's build for older processors over it in "
        f"ragline's environment: `pip {command}` (with pipx: `pipx runpip ragline {command}`)"
    )


def check_lancedb_cpu() -> None:
    """Raise ``UnsupportedCpuError`` where importing LanceDB would crash the process.
    Call it before ``import lancedb``; it asks once per process."""
    global _checked
    if _checked:
        return
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # another NumPy layout: nothing to ask, LanceDB is loaded as is
        features = {}
    machine = platform.machine()
    # The usual processor has what the wheel needs: no package metadata read at start-up.
    if missing_cpu_features(machine, features, "lancedb"):
        distribution, version = _installed_lancedb()
        missing = missing_cpu_features(machine, features, distribution)
        if missing:
            raise UnsupportedCpuError(unsupported_cpu_message(missing, version))
    _checked = True


def _installed_lancedb() -> tuple[str, str]:
    """Which LanceDB build is installed, and its version."""
    for name in (COMPAT_DISTRIBUTION, "lancedb"):
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "lancedb", "?"
