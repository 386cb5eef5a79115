#!/usr/bin/env bash
# Install ragline the way the README's alternative to clone-and-make does, into a
# throw-away home, and use it from outside the repository: `ragline --help`, then
# `init`, `index` and `search` on a 3-note vault.
#   scripts/check_packaging.sh pipx [PYTHON]    pipx install <this repository>
#   scripts/check_packaging.sh uv [PYTHON]      uv tool install <this repository>
# PYTHON defaults to python3.11. No extra index: the default install has no PyTorch,
# transformers or NVIDIA libraries, and the check fails if any of them lands in it;
# it prints the environment's size and the install time (docs/benchmarks.md).
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
started=$SECONDS
case "$tool" in
  pipx)
    # pip semantics for --pip-args (pipx >= 1.18 would use uv when it finds one).
    export PIPX_HOME="$work/pipx" PIPX_BIN_DIR="$work/bin" PIPX_MAN_DIR="$work/man"
    export PIPX_DEFAULT_BACKEND=pip
    "$tools/bin/pipx" install --python "$python" "$repo"
    ;;
  uv)
    export UV_TOOL_DIR="$work/uv-tools" UV_TOOL_BIN_DIR="$work/bin" UV_NATIVE_TLS=1
    # uv does not read pip's configuration: pass on its local wheels (find-links).
    links="$("$tools/bin/python" -m pip config get global.find-links 2>/dev/null || true)"
    links="${PIP_FIND_LINKS:-$links}"
    args=(--python "$python")
    [ -n "$links" ] && args+=(--find-links "$links")
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
import importlib.metadata, importlib.util, sys
repo = sys.argv[1]
for name in ("ragline", "rag_serving", "rag_assets", "rag_assets.definitions"):
    origin = importlib.util.find_spec(name).origin
    assert not origin.startswith(repo), f"{name} imported from the repository: {origin}"
# The default install embeds with ONNX Runtime alone (issue 29): no PyTorch, no
# transformers, none of the NVIDIA libraries a CUDA build of torch pulls.
names = sorted(d.metadata["Name"].lower() for d in importlib.metadata.distributions())
heavy = [n for n in names if n in ("torch", "transformers", "sentence-transformers")
         or n.startswith(("nvidia-", "triton"))]
assert not heavy, f"the default install holds {heavy}"
print(f"python {sys.version.split()[0]}, {len(names)} packages, no torch/transformers/nvidia-*")
EOF
echo "environment: $(du -sm "$venv" | cut -f1) MB"

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
