#!/usr/bin/env bash
# Install the deployment tools the deploy tests call, pinned, once per machine:
#   helm    built from the Go module proxy (helm.sh/helm/v3) with `go install`
#   cdk     the AWS CDK CLI from npm (aws-cdk), in its own prefix
# into ~/.cache/mail-search-sidecar/ (or $XDG_CACHE_HOME/...), outside the repository, so a
# second clone or CI's next run on the same machine reuses them (a few ms) and a fresh machine
# still gets them (helm's build takes ~1-3 min, the CLI's npm install ~10 s). The Python side
# (aws-cdk-lib, cfn-lint, parliament, kubernetes-validate) is in uv.lock's dev group.
#
# Prints nothing when both are there; `--print-env` prints the two paths as shell variables
# (SIDECAR_HELM=..., SIDECAR_CDK=...) for `eval`.
set -euo pipefail

HELM_VERSION=v3.22.0
CDK_CLI_VERSION=2.1148.1

cache=${XDG_CACHE_HOME:-$HOME/.cache}/mail-search-sidecar
helm_dir=$cache/helm-$HELM_VERSION
cdk_dir=$cache/aws-cdk-$CDK_CLI_VERSION

need_apt=()
command -v go >/dev/null || [ -x "$helm_dir/helm" ] || need_apt+=(golang-go)
command -v npm >/dev/null || [ -x "$cdk_dir/node_modules/.bin/cdk" ] || need_apt+=(nodejs npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "ensure-deploy-tools: installing ${need_apt[*]} (Debian)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

if [ ! -x "$helm_dir/helm" ]; then
  echo "ensure-deploy-tools: building helm $HELM_VERSION into $helm_dir (first time only)" >&2
  mkdir -p "$helm_dir.tmp"
  # GOFLAGS=-buildvcs=false: no VCS stamping (the module cache is not a git checkout).
  GOBIN="$helm_dir.tmp" GOFLAGS=-buildvcs=false go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  rm -rf "$helm_dir" && mv "$helm_dir.tmp" "$helm_dir"   # never a half-built helm in place
fi

if [ ! -x "$cdk_dir/node_modules/.bin/cdk" ]; then
  echo "ensure-deploy-tools: installing aws-cdk $CDK_CLI_VERSION into $cdk_dir (first time only)" >&2
  rm -rf "$cdk_dir.tmp" && mkdir -p "$cdk_dir.tmp"
  npm install --prefix "$cdk_dir.tmp" --no-audit --no-fund --silent "aws-cdk@$CDK_CLI_VERSION"
  rm -rf "$cdk_dir" && mv "$cdk_dir.tmp" "$cdk_dir"
fi

if [ "${1:-}" = "--print-env" ]; then
  echo "SIDECAR_HELM=$helm_dir/helm"
  echo "SIDECAR_CDK=$cdk_dir/node_modules/.bin/cdk"
fi
