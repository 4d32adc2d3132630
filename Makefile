# Two commands from a fresh clone: `make demo` and `make test` (see README).
.PHONY: venv demo test test-unit lint lock stack-up stack-down clean

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

stack-up: venv
	.venv/bin/sidecar stack up

stack-down: venv
	.venv/bin/sidecar stack down

clean:
	-.venv/bin/sidecar stack down
	rm -rf .venv .sidecar
