"""Issue 40 part 5: tracing is opt-in. Without ``OTEL_EXPORTER_OTLP_ENDPOINT`` the sidecar's
processes import no OpenTelemetry module of their own — no SDK tracer, exporter or
instrumentation — and install no tracer provider, though the ``[otel]`` extra is installed in
this environment.

One caveat measured here rather than assumed away: two dependencies import parts of
OpenTelemetry themselves whenever it is installed — redis-py 8 the API and the SDK's metrics at
``import redis``, FastAPI 0.163 the API's propagators and logs for its own telemetry hooks. Those
libraries' imports are the baseline: the sidecar's processes must import nothing beyond them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SIDECAR = """
import json, sys
from typer.testing import CliRunner
from indexer.cli.main import app
from indexer.pipeline import tasks, celery_app
from indexer.sources import lambda_handler
from indexer.settings import Settings
from search_api.app import create_app
from indexer import otel
create_app(Settings())
CliRunner().invoke(app, ["init", "--help"])
assert not otel.active()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
"""
BASELINE = """
import json, sys
import redis
from fastapi import FastAPI
from fastapi.testclient import TestClient
application = FastAPI()
application.get("/")(lambda: {})
TestClient(application).get("/")
print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
"""


def _imported(code: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_without_an_endpoint_no_tracing_module_is_imported() -> None:
    pytest.importorskip("opentelemetry.sdk.trace")  # the extra is installed: the test means it
    sidecar, baseline = _imported(SIDECAR), _imported(BASELINE)
    assert sidecar <= baseline, sorted(sidecar - baseline)
    ours = ("opentelemetry.instrumentation", "opentelemetry.exporter", "opentelemetry.sdk.trace")
    assert not [m for m in sidecar if m.startswith(ours)]
