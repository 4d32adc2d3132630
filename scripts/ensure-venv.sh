#!/usr/bin/env bash
# Create or refresh .venv/ from the lock file (uv.lock, with hashes), the standard way:
# `uv sync --frozen` installs exactly the locked versions and the project itself editable
# (with its dist-info, so `sidecar --version` and importlib.metadata work).
#
# Speed: uv keeps every downloaded wheel in its cache (~/.cache/uv, or UV_CACHE_DIR) and links
# it into each environment, so torch's ~3 GB are downloaded once per machine; a second clone,
# or CI on a machine that has run it before, is ready in seconds. A .venv whose lock did not
# change is left as it is (the stamp also covers the sync's flags).
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.8
PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
  || { echo "ensure-venv: Python >= 3.11 required" >&2; exit 1; }

uv_bin=$(command -v uv || true)
if [ -z "$uv_bin" ] || [ "$("$uv_bin" --version | cut -d' ' -f2)" != "$UV_VERSION" ]; then
  # A private, pinned uv (no change to the system's Python packages).
  tool_dir=${XDG_CACHE_HOME:-$HOME/.cache}/mail-search-sidecar/uv-$UV_VERSION
  if [ ! -x "$tool_dir/bin/uv" ]; then
    echo "ensure-venv: installing uv $UV_VERSION into $tool_dir (first time only)" >&2
    "$PYTHON" -m venv "$tool_dir"
    "$tool_dir/bin/pip" install -q "uv==$UV_VERSION"
  fi
  uv_bin=$tool_dir/bin/uv
fi

export UV_PYTHON="$PYTHON" UV_PYTHON_DOWNLOADS=never UV_LINK_MODE=${UV_LINK_MODE:-hardlink}
# --compile-bytecode: uv writes no .pyc by default, and where PYTHONDONTWRITEBYTECODE is set
# (as on these machines) Python never writes them either, so every process compiled torch,
# transformers and sklearn from source again: `import sentence_transformers` took 15 s instead
# of 6.6 s, paid by every worker and CLI start. Compiling once costs ~25 s per environment.
sync_flags="--frozen --all-packages --all-extras --compile-bytecode"
stamp=$( (cat uv.lock pyproject.toml tools/pyproject.toml; echo "$sync_flags") | sha256sum | cut -c1-16)
if [ "$(cat .venv/.lock-stamp 2>/dev/null)" != "$stamp" ]; then
  # shellcheck disable=SC2086
  "$uv_bin" sync $sync_flags --quiet
  echo "$stamp" > .venv/.lock-stamp
fi
