#!/usr/bin/env bash
# Create a virtual environment and install ragline into it (idempotent; fast when
# nothing changed).
#   scripts/setup.sh                        .venv (Python 3.11), runtime dependencies
#   scripts/setup.sh --dev                  plus the test tools
#   scripts/setup.sh --dev --python 3.13    .venv-py313 with Python 3.13 (any of 3.11-3.13)
#   scripts/setup.sh --dev --no-torch ...   the test tools without PyTorch (tests marked
#                                           `torch` cannot run there: deselect them)
# The Python is found on PATH, among pyenv's versions, or installed with
# `uv python install` (uv from PyPI, in .venv-tools/). PYTHON=/path/to/python overrides.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
torch=yes
version="3.11"
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) extras="[dev]" ;;
    --no-torch) torch=no ;;
    --python) version="${2:?--python needs a version such as 3.13}"; shift ;;
    *) echo "usage: scripts/setup.sh [--dev [--no-torch]] [--python 3.11|3.12|3.13]" >&2; exit 2 ;;
  esac
  shift
done
venv=".venv"
[ "$version" = "3.11" ] || venv=".venv-py${version//./}"

is_version() { "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null; }

find_python() {
  local candidate
  for candidate in "python$version" python3; do
    if command -v "$candidate" >/dev/null && is_version "$candidate"; then
      command -v "$candidate"; return
    fi
  done
  local root
  root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
  for candidate in $(ls -d "$root/versions/$version".* 2>/dev/null | sort -V -r); do
    if [ -x "$candidate/bin/python$version" ] && is_version "$candidate/bin/python$version"; then
      echo "$candidate/bin/python$version"; return
    fi
  done
  # uv downloads a standalone CPython build (needs github.com).
  local uv
  uv="$(command -v uv || true)"
  if [ -z "$uv" ]; then
    local bootstrap
    bootstrap="$(command -v python3.11 || command -v python3)"
    [ -x .venv-tools/bin/uv ] || { "$bootstrap" -m venv .venv-tools && .venv-tools/bin/python -m pip install --quiet "uv>=0.5" "pipx>=1.7"; } >&2
    uv=.venv-tools/bin/uv
  fi
  echo "Python $version not found: installing it with uv" >&2
  "$uv" python install "$version" >&2 && "$uv" python find "$version"
}

python="${PYTHON:-}"
[ -n "$python" ] || python="$(find_python || true)"
[ -n "$python" ] && is_version "$python" || {
  echo "ragline's $venv needs Python $version: install it (pyenv install $version, uv python install $version) or set PYTHON=/path/to/python$version" >&2
  exit 1
}

[ -n "$extras" ] && [ "$torch" = yes ] && extras="[dev,torch]"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
stamp="$venv/.ragline-installed$(echo "$extras" | tr -d '[],')-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  if [ "$extras" = "[dev,torch]" ]; then
    # The test tools include PyTorch (the tests compare the torch-free embedder with
    # sentence-transformers): its CPU build first and pinned, from PyTorch's CPU index
    # when it answers (or a local wheel pip is configured with); torch from PyPI alone
    # is a multi-GB CUDA build on Linux. A plain setup installs no PyTorch at all, and
    # --no-torch leaves it out of the test tools (the Python 3.13 run: no CPU wheel of
    # it is at hand offline, and the CUDA one filled CI's disk).
    cpu_index=https://download.pytorch.org/whl/cpu
    torch_index=()
    if "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('$cpu_index/torch/', timeout=10)" 2>/dev/null; then
      torch_index=(--extra-index-url "$cpu_index")
    else
      echo "($cpu_index does not answer: torch==2.13.0 from pip's configured indexes)" >&2
    fi
    "$venv/bin/python" -m pip install --quiet ${torch_index[@]+"${torch_index[@]}"} "torch==2.13.0"
  fi
  "$venv/bin/python" -m pip install --quiet -e ".${extras}"
  touch "$stamp"
fi
[ "$venv" = ".venv" ] || exit 0  # the system packages below are set up once, with .venv

# The UI test drives Debian's chromium through Playwright (Playwright's own browser
# download does not work offline).
if [ -n "$extras" ] && [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian's chromium for the UI test" >&2
    (apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; })
  else
    echo "the UI test needs /usr/bin/chromium: sudo apt-get install chromium" >&2
  fi
fi

# The Celery tests run a real Redis broker (Debian's redis-server, started by the
# tests on a port of their own).
if [ -n "$extras" ] && ! command -v redis-server >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian's redis-server for the Celery worker tests" >&2
    (apt-get install -y -q --no-install-recommends redis-server >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends redis-server >/dev/null; })
  else
    echo "the Celery worker tests need redis-server: sudo apt-get install redis-server" >&2
  fi
fi

# The processor check (rag_serving/index/cpu.py) is tested on an emulated pre-AVX2
# processor: QEMU's user-mode emulator (Debian's qemu-user) runs the venv's Python.
if [ -n "$extras" ] && ! command -v qemu-x86_64 >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian's qemu-user for the processor check's test" >&2
    (apt-get install -y -q --no-install-recommends qemu-user >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends qemu-user >/dev/null; })
  else
    echo "the processor check's test needs qemu-x86_64: sudo apt-get install qemu-user" >&2
  fi
fi

# The Calibre tests index a library made by Calibre's own `calibredb` (Debian's
# calibre package; without it they build metadata.db from Calibre's schema instead).
if [ -n "$extras" ] && ! command -v calibredb >/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian's calibre for the Calibre library tests" >&2
    (apt-get install -y -q --no-install-recommends calibre >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends calibre >/dev/null; }) || echo "could not install calibre; the Calibre tests build metadata.db from its schema" >&2
  else
    echo "the Calibre tests use calibredb when installed: sudo apt-get install calibre" >&2
  fi
fi

# OCR of scanned PDFs and images (a runtime feature) reads Tesseract's language data
# from Debian's packages; PyMuPDF brings the OCR engine itself.
tesseract_langs="$(tesseract --list-langs 2>/dev/null || true)"
if ! grep -qx eng <<<"$tesseract_langs"; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing Debian's tesseract-ocr for OCR" >&2
    (apt-get install -y -q tesseract-ocr tesseract-ocr-eng >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q tesseract-ocr tesseract-ocr-eng >/dev/null; })
  else
    echo "OCR of scanned PDFs and images needs Tesseract: sudo apt-get install tesseract-ocr tesseract-ocr-eng" >&2
  fi
fi
