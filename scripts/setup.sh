#!/usr/bin/env bash
# Create .venv and install ragline into it (idempotent; fast when nothing changed).
#   scripts/setup.sh          runtime dependencies
#   scripts/setup.sh --dev    plus the test tools
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      python="$candidate"; break
    fi
  done
fi
[ -n "$python" ] || { echo "ragline needs Python 3.11 (set PYTHON=/path/to/python3.11)" >&2; exit 1; }

[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=".venv/.ragline-installed$(echo "$extras" | tr -d '[]')-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  # torch first and pinned: its CPU build; an unpinned torch pulls a multi-GB CUDA build.
  .venv/bin/python -m pip install --quiet "torch==2.13.0"
  .venv/bin/python -m pip install --quiet -e ".${extras}"
  touch "$stamp"
fi

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
