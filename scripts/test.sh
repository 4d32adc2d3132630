#!/usr/bin/env bash
# The README's test command: start the real local stack, run the whole suite, stop the stack.
set -uo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
export SIDECAR_AWS_ENDPOINT_URL=${SIDECAR_AWS_ENDPOINT_URL:-http://127.0.0.1:5000}
# A full run once left ~260 small indices on the node, and at 512 MB its parent circuit
# breaker answered 429 near the end; stack tests now delete theirs, and 1 GB keeps the margin.
export SIDECAR_OPENSEARCH_HEAP=${SIDECAR_OPENSEARCH_HEAP:-1g}

# Where PYTHONDONTWRITEBYTECODE is set, every process of the suite (workers, CLI runs, the API)
# would compile the project's own modules again: ~0.25 s each, hundreds of times.
.venv/bin/python -m compileall -q -j 0 indexer search_api tools/sidecar_tools tests >/dev/null

bash scripts/ensure-test-tools.sh || exit 1
# podman, runc and debootstrap for tests/integration/test_image.py (the real image, built and run)
bash scripts/ensure-image-tools.sh || exit 1
.venv/bin/sidecar stack up || { echo "test: the stack did not come up" >&2; exit 1; }
trap '.venv/bin/sidecar stack down' EXIT
bash scripts/ensure-deploy-tools.sh || { echo "test: the deploy tools (helm, cdk) did not install" >&2; exit 1; }
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test: pytest collected no tests: that is a failure" >&2
  rc=1
fi
exit "$rc"
