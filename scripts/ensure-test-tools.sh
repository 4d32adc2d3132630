#!/usr/bin/env bash
# What the suite needs beyond the stack (which installs Redis and a JDK itself): Debian's
# Chromium and ChromeDriver for the console's browser tests, and Debian's prometheus package for
# its promtool (tests/integration/test_deploy_monitoring.py checks and unit-tests the alert
# rules). Installed with apt-get when this runs as root on Debian; otherwise one line says how,
# and `make test` stops at once.
set -euo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v promtool >/dev/null || missing+=(prometheus)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "test: the console and alert-rule tests need ${missing[*]}: run 'sudo apt-get install -y ${missing[*]}' (Debian) and retry" >&2
  exit 1
fi
echo "ensure-test-tools: installing ${missing[*]} (first time only)" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
