"""Metrics: the lag rule (pure), the API's metrics (on their own port, bounded labels), and the real
worker (multiprocess: pool children counted) and tailer processes serving theirs while the
writer's mail flows through the stream; their logs are JSON lines."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from indexer.metrics import ShardLag, bulk_error_class, epoch_seconds
from indexer.settings import Settings, to_env
from search_api.app import create_app
from search_api.serve import metrics_registry
from sidecar_tools.writer.files import load_file
from tests.support.api_fixtures import free_port
from tests.support.ops_helpers import sample_subset
from tests.support.pipeline_helpers import prepare_tables, wait_until


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _lag(collector: ShardLag) -> dict[str, float]:
    return {s.labels["shard"]: s.value for f in collector.collect() for s in f.samples}


def test_shard_lag_rule() -> None:
    lag = ShardLag()
    lag.applied("s1", datetime.fromtimestamp(time.time() - 30, UTC))
    lag.applied("s2", (time.time() - 5) * 1000)  # Kinesis wrappers: milliseconds
    got = _lag(lag)
    assert 29 <= got["s1"] <= 40 and 4 <= got["s2"] <= 15
    lag.caught_up("s1")
    assert _lag(lag)["s1"] == 0
    lag.behind("s1")  # an error: the lag of the last applied record shows again, growing
    assert _lag(lag)["s1"] >= 29
    lag.forget("s2")  # a closed shard read to its end
    assert set(_lag(lag)) == {"s1"}
    lag.caught_up("idle")
    assert _lag(lag)["idle"] == 0
    assert epoch_seconds("x") is None and epoch_seconds(1700000000) == 1700000000.0
    assert [bulk_error_class(s) for s in (429, 503, 0, 400)] == [
        "rejected_429",
        "server_5xx",
        "server_5xx",
        "client_4xx",
    ]


@pytest.mark.stack
def test_api_metrics_are_not_on_the_api(settings: Settings) -> None:
    """The public app has no /metrics (issue 23: an ALB forwarding /* exposed it); what the
    metrics port serves (``metrics_registry``) has bounded labels only."""
    prepare_tables(settings)  # the dead-letter gauge counts entries in the sidecar's table
    app = create_app(settings)
    with TestClient(app) as client:
        client.get("/healthz")
        client.get("/v1/mailboxes/secret-box@x.org/search", params={"q": "a", "mode": "hybrid"})
        client.get("/no/such/path-with-a-secret")
        assert client.get("/metrics").status_code == 404
    text = generate_latest(metrics_registry(settings)).decode()
    samples = _samples(text)
    count = "sidecar_api_request_seconds_count"
    search = (("mode", "hybrid"), ("route", "/v1/mailboxes/{mailbox_id}/search"), ("status", "401"))
    unmatched = (("mode", ""), ("route", "<unmatched>"), ("status", "404"))
    assert samples[(count, search)] >= 1 and samples[(count, unmatched)] >= 1
    assert "secret" not in text  # neither mailbox ids nor raw paths become labels
    assert samples[("sidecar_redis_up", ())] == 1
    depth = ("sidecar_queue_depth", (("queue", settings.fulltext_queue),))
    assert samples[depth] == 0 and samples[("sidecar_dlq_entries", ())] == 0
    assert "/metrics" not in app.openapi()["paths"]


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    try:
        return _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
    except httpx.HTTPError:
        return {}


def _spawn(settings: Settings, log: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "indexer.cli.main", *args],
        env={**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _json_lines(path: Path) -> list[dict[str, object]]:
    lines = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return [e for e in lines if isinstance(e, dict) and "level" in e]


@pytest.mark.stack
@pytest.mark.slow
def test_worker_and_tailer_metrics(settings: Settings, tmp_path: Path, unique: str) -> None:
    ddb = prepare_tables(settings)
    load_file(ddb, settings.table, sample_subset(tmp_path, 4), f"m-{unique}")
    worker_port, tail_port = free_port(), free_port()
    worker_log, tail_log = tmp_path / "worker.log", tmp_path / "tail.log"
    worker = _spawn(settings, worker_log, "worker", "--metrics-port", str(worker_port))
    tailer = _spawn(settings, tail_log, "tail", "--metrics-port", str(tail_port))
    try:

        def caught_up() -> bool:
            got = _scrape(tail_port)
            lags = {dict(labels)["reader"]: v for (n, labels), v in got.items()
                    if n == "sidecar_stream_lag_seconds"}
            applied = got.get(("sidecar_records_applied_total", ()), 0)
            # one reader per shard (the default `sidecar tail --stage all`), caught up
            return applied > 0 and set(lags) == {"all"} and max(lags.values()) == 0

        assert wait_until(caught_up, timeout=240, interval=1), tail_log.read_text()[-3000:]
        tail = _scrape(tail_port)
        assert (
            tail[("sidecar_records_read_total", ())] >= tail[("sidecar_records_applied_total", ())]
        )
        assert tail[("sidecar_records_dead_lettered_total", ())] == 0
        assert tail[("sidecar_stream_gaps_total", ())] == 0
        assert tail[("sidecar_redis_up", ())] == 1

        work = _scrape(worker_port)  # summed over the Celery pool children
        applied = (("outcome", "applied"), ("stage", "fulltext"))
        assert work[("sidecar_worker_messages_total", applied)] >= 4
        assert work[("sidecar_embedded_texts_total", ())] == 4
        assert work[("sidecar_embed_batch_size_count", ())] >= 1
        assert ("sidecar_queue_depth", (("queue", settings.vectors_queue),)) in work
    finally:
        _stop(tailer)
        _stop(worker)
    assert any("lease" in str(e["message"]) for e in _json_lines(tail_log))
    assert _json_lines(worker_log), worker_log.read_text()[-2000:]
