"""Every API answer is logged and counted, a forced internal error included (issue 16)."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest

from indexer.settings import Settings
from search_api.app import create_app
from search_api.serve import metrics_registry

pytestmark = [pytest.mark.stack]


def test_a_forced_internal_error_is_in_the_access_log_and_metrics(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(settings.model_copy(update={"env": "dev"}), vectors=False)

    def boom(item: str) -> None:
        raise RuntimeError(f"forced failure for {item}")

    route = f"/forced-error/{settings.queue_prefix}/{{item}}"
    app.add_api_route(route, boom)
    with TestClient(app, raise_server_exceptions=False) as client, caplog.at_level(logging.INFO):
        response = client.get(route.replace("{item}", "x"))
    metrics = generate_latest(metrics_registry(settings)).decode()
    assert response.status_code == 500 and response.json() == {"detail": "internal error"}
    assert response.headers["cache-control"] == "no-store"
    logged = [r for r in caplog.records if r.getMessage() == "request"]
    assert [(r.__dict__["route"], r.__dict__["status"]) for r in logged][:1] == [(route, 500)]
    assert "latency_ms" in logged[0].__dict__
    series = [
        line
        for line in metrics.splitlines()
        if line.startswith("sidecar_api_request_seconds_count") and route in line
    ]
    assert series and 'status="500"' in series[0] and series[0].endswith(" 1.0"), series
