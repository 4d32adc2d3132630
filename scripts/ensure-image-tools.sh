#!/usr/bin/env bash
# What tests/integration/test_image.py needs to build and run the real image: Debian's podman
# with the runc runtime, debootstrap (the test builds its Debian 12 base image from Debian's
# packages: no registry serves base images here), and a containers.conf without the default
# nofile ulimit (refused on this machine kind). Why each piece: ../shared/tools/README.md,
# "Real containers with podman".
# Installed with apt-get when this runs as root on Debian; otherwise one line says how, and
# `make test` stops at once. Quick (a few ms) when everything is there.
set -euo pipefail
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v debootstrap >/dev/null || missing+=(debootstrap)
conf=/etc/containers/containers.conf
conf_ok=1
grep -qs '^default_ulimits *= *\[\]' "$conf" || conf_ok=0
if [ ${#missing[@]} -eq 0 ] && [ "$conf_ok" -eq 1 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "test: the image tests need ${missing[*]:-} and default_ulimits = [] in $conf: run 'sudo apt-get install -y podman runc debootstrap' and 'printf \"[containers]\\ndefault_ulimits = []\\n\" | sudo tee $conf' (Debian) and retry" >&2
  exit 1
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "ensure-image-tools: installing ${missing[*]} (first time only)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
if [ "$conf_ok" -eq 0 ]; then
  mkdir -p /etc/containers
  if [ -s "$conf" ] && grep -q '^\[containers\]' "$conf"; then
    sed -i 's/^\[containers\]$/[containers]\ndefault_ulimits = []/' "$conf"
  else
    printf '[containers]\ndefault_ulimits = []\n' >>"$conf"
  fi
fi
