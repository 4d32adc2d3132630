# Two commands from a fresh clone: `make demo` and `make test` (see README).
.PHONY: venv demo test test-unit lint lock release stack-up stack-down clean

export HF_HUB_OFFLINE := 1
export SIDECAR_AWS_ENDPOINT_URL ?= http://127.0.0.1:5000

venv:
	@bash scripts/ensure-venv.sh

demo: venv
	.venv/bin/sidecar stack up
	.venv/bin/sidecar demo

test: venv
	bash scripts/test.sh

# The tests that need no service: nothing is started.
test-unit: venv
	.venv/bin/python -m pytest tests/unit -q

lint: venv
	.venv/bin/python -m ruff check indexer search_api tools tests
	.venv/bin/python -m mypy

# Re-resolve uv.lock after a change of pyproject.toml (then commit it).
lock: venv
	.venv/bin/uv lock

# Everything an adopter consumes, into $(DIST) with SHA256SUMS (sidecar_tools/release.py):
# wheel + sdist, images (podman; IMAGES= builds none), chart, OpenAPI document, Python client,
# a CycloneDX SBOM per wheel and image. SOURCE= the repository URL (default: git's origin);
# PYTHON_IMAGE= the images' base (default python:3.11-slim-bookworm).
IMAGES ?= full,slim,lambda
DIST ?= dist
release: venv
	.venv/bin/python -m sidecar_tools.release --out "$(DIST)" --images "$(IMAGES)" \
		$(if $(SOURCE),--source "$(SOURCE)") $(if $(PYTHON_IMAGE),--python-image "$(PYTHON_IMAGE)")

stack-up: venv
	.venv/bin/sidecar stack up

stack-down: venv
	.venv/bin/sidecar stack down

clean:
	-.venv/bin/sidecar stack down
	rm -rf .venv .sidecar
