#!/usr/bin/env bash
# What tests/integration/test_image.py needs to build and run the real image: Debian's podman
# with the runc runtime, debootstrap (the test builds its Debian 12 base image from Debian's
# packages: no registry serves base images here), and a containers.conf drop-in:
#   runtime = "runc"            crun, podman's default, fails on this kernel's hybrid cgroups
#   cgroup_manager = "cgroupfs" no systemd here
#   default_ulimits = []        the default nofile ulimit is refused (setrlimit: not permitted)
#   events_logger = "file"      no journald here
# (../shared/tools/README.md, "Real containers with podman"). Installed with apt-get when this
# runs as root on Debian; otherwise one line says how, and `make test` stops at once. Quick
# (a few ms) when everything is there.
set -euo pipefail
conf=/etc/containers/containers.conf.d/50-mail-search-sidecar.conf
want='[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"'
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v debootstrap >/dev/null || missing+=(debootstrap)
conf_ok=1
[ "$(cat "$conf" 2>/dev/null)" = "$want" ] || conf_ok=0
if [ ${#missing[@]} -eq 0 ] && [ "$conf_ok" -eq 1 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "test: the image tests need podman, runc, debootstrap and $conf: run 'sudo bash scripts/ensure-image-tools.sh' (Debian) and retry" >&2
  exit 1
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "ensure-image-tools: installing ${missing[*]} (first time only)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
if [ "$conf_ok" -eq 0 ]; then
  mkdir -p "$(dirname "$conf")"
  printf '%s\n' "$want" >"$conf.tmp" && mv "$conf.tmp" "$conf"
fi
