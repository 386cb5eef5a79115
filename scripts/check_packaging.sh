#!/usr/bin/env bash
# Install ragline the way the README's alternative to clone-and-make does, into a
# throw-away home, and use it from outside the repository: `ragline --help`, then
# `init`, `index` and `search` on a 3-note vault.
#   scripts/check_packaging.sh pipx [PYTHON]    pipx install <this repository>
#   scripts/check_packaging.sh uv [PYTHON]      uv tool install <this repository>
# PYTHON defaults to python3.11. PyTorch's CPU wheels come from
# https://download.pytorch.org/whl/cpu when it answers (what the README tells users
# to pass); else from what pip is configured with (this machine's local wheel). The
# check fails on a CUDA build of torch (PyPI's, several GB) unless ALLOW_CUDA_TORCH=1.
# pipx and uv themselves are installed from PyPI into .venv-tools/ (ignored by git).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
tool="${1:?usage: scripts/check_packaging.sh pipx|uv [PYTHON]}"
python="${2:-python3.11}"
python="$(command -v "$python" || true)"
[ -n "$python" ] || { echo "no ${2:-python3.11} on PATH" >&2; exit 1; }

tools="$repo/.venv-tools"
if [ ! -x "$tools/bin/uv" ] || [ ! -x "$tools/bin/pipx" ]; then
  "$python" -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet "pipx>=1.7" "uv>=0.5"
fi

work="$(mktemp -d /tmp/ragline-packaging.XXXXXX)"
trap 'rm -rf "$work"' EXIT
cpu_index="https://download.pytorch.org/whl/cpu"
if "$python" -c "import urllib.request; urllib.request.urlopen('$cpu_index/torch/', timeout=10)" 2>/dev/null; then
  torch_index="$cpu_index"
else
  torch_index=""
  echo "($cpu_index does not answer here: torch comes from pip's configuration or PyPI)"
fi

started=$SECONDS
case "$tool" in
  pipx)
    # pip semantics for --pip-args (pipx >= 1.18 would use uv when it finds one).
    export PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/bin" PIPX_MAN_DIR="$work/man"
    export PIPX_DEFAULT_BACKEND=pip
    pip_args=()
    [ -n "$torch_index" ] && pip_args=(--pip-args "--extra-index-url $torch_index")
    "$tools/bin/pipx" install --python "$python" ${pip_args[@]+"${pip_args[@]}"} "$repo"
    ;;
  uv)
    export UV_TOOL_DIR="$work/uv-tools" UV_TOOL_BIN_DIR="$work/bin" UV_NATIVE_TLS=1
    # uv does not read pip's configuration: pass on its local wheels (find-links).
    links="$("$tools/bin/python" -m pip config get global.find-links 2>/dev/null || true)"
    links="${PIP_FIND_LINKS:-$links}"
    args=(--python "$python")
    [ -n "$links" ] && args+=(--find-links "$links")
    [ -n "$torch_index" ] && args+=(--torch-backend cpu)
    "$tools/bin/uv" tool install "${args[@]}" "$repo"
    ;;
  *)
    echo "unknown installer $tool (pipx or uv)" >&2
    exit 2
    ;;
esac
echo "installed with $tool in $((SECONDS - started)) s"

ragline="$work/bin/ragline"
venv="$(dirname "$(readlink -f "$ragline")")/.."
cd "$work"  # nothing of the repository on sys.path or in the current folder
"$ragline" --help | grep -q "ragline: a local-first personal knowledge index"
"$work/bin/ragline" --version
"$venv/bin/python" - "$repo" <<'EOF'
import importlib.util, os, sys, torch
repo = sys.argv[1]
for name in ("ragline", "rag_serving", "rag_assets", "rag_assets.definitions"):
    origin = importlib.util.find_spec(name).origin
    assert not origin.startswith(repo), f"{name} imported from the repository: {origin}"
print(f"python {sys.version.split()[0]}, torch {torch.__version__}")
# PyTorch's CUDA build is several GB of libraries a CPU-only tool does not use.
assert torch.version.cuda is None or os.environ.get("ALLOW_CUDA_TORCH"), torch.__version__
EOF

mkdir -p vault
printf '# Otters\n\nSea otters hold hands while they sleep so they do not drift apart.\n' > vault/otters.md
printf '# Sourdough\n\nFeed the starter with rye flour the evening before baking.\n' > vault/sourdough.md
printf '# Backups\n\nKeep three copies of your data on two media, one off site.\n' > vault/backups.md
"$ragline" init vault --output ragline.toml
"$ragline" --config ragline.toml index
"$ragline" --config ragline.toml search "animals sleeping holding hands" --k 1 --json > hits.json
"$venv/bin/python" - <<'EOF'
import json
hits = json.load(open("hits.json"))["hits"]
assert hits and hits[0]["path"] == "otters.md", hits
print("search found", hits[0]["path"])
EOF
test -f .ragline/dagster/dagster.yaml  # the packaged instance settings were installed
"$ragline" --config ragline.toml status
echo "$tool install from $repo with $("$python" --version): ok in $((SECONDS - started)) s"
