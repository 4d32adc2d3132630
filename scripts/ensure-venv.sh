#!/usr/bin/env bash
# Create .venv/ for this checkout, reusing a cached dependency environment keyed on the
# requirements files' hash (torch alone is ~3 GB: never reinstall it when nothing changed).
#
#   cache:  ${SIDECAR_VENV_CACHE:-~/.cache/mail-search-sidecar}/deps-<hash>/   (all pinned deps)
#   .venv:  a small venv of this checkout whose site-packages points at the cache (.pth),
#           with the project installed editable — so every clone gets .venv/bin/sidecar fast.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
  || { echo "ensure-venv: Python >= 3.11 required" >&2; exit 1; }
hash=$(cat requirements/runtime.txt requirements/dev.txt <("$PYTHON" -V) | sha256sum | cut -c1-16)
cache_root=${SIDECAR_VENV_CACHE:-$HOME/.cache/mail-search-sidecar}
deps="$cache_root/deps-$hash"

if [ ! -f "$deps/.complete" ]; then
  # Installed in place; the marker is written last, so an interrupted install is redone.
  echo "ensure-venv: installing pinned dependencies into $deps (first time only)" >&2
  rm -rf "$deps"
  mkdir -p "$cache_root"
  "$PYTHON" -m venv "$deps"
  "$deps/bin/pip" install -q --upgrade pip
  "$deps/bin/pip" install -q -r requirements/runtime.txt -r requirements/dev.txt
  touch "$deps/.complete"
fi

site_deps=$("$deps/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/.deps 2>/dev/null)" != "$deps" ]; then
  rm -rf .venv
  "$PYTHON" -m venv --without-pip .venv
  echo "$deps" > .venv/.deps
fi
# The project itself, "editable" without pip: its source on sys.path and the console script.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$PWD" "$site_deps" > "$site/_sidecar.pth"
cat > .venv/bin/sidecar <<SCRIPT
#!$PWD/.venv/bin/python
from indexer.cli.main import app

app()
SCRIPT
chmod +x .venv/bin/sidecar
.venv/bin/python -c 'import torch, opensearchpy, qdrant_client, celery, indexer' \
  || { echo "ensure-venv: environment is broken; delete $deps and .venv and retry" >&2; exit 1; }
