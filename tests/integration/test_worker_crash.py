"""A worker SIGKILLed mid-batch loses nothing: after a restart everything converges."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import redis
from celery.exceptions import TimeoutError as CeleryTimeoutError

from indexer.pipeline.runner import ingestor
from indexer.settings import Settings
from indexer.sources.files import read_sources
from sidecar_tools.writer.files import load_file
from tests.conftest import CORPORA
from tests.pipeline_helpers import (
    export_stream,
    opensearch_docs,
    prepare_tables,
    qdrant_points,
    table_messages,
    wait_until,
    workers,
)

pytestmark = [pytest.mark.stack, pytest.mark.slow]


def _broker_state(settings: Settings) -> str:
    """What a stuck redelivery is waiting on: ready tasks, unacked ones, the restore lock."""
    client = redis.Redis.from_url(settings.redis_url)
    queues = {q: client.llen(q) for q in (settings.fulltext_queue, settings.vectors_queue)}
    return f"ready {queues}, unacked {client.hlen('unacked')}, lock ttl {client.ttl('unacked_mutex')} s"


def test_sigkilled_workers_lose_nothing(settings: Settings, tmp_path: Path) -> None:
    # Short visibility timeout so a dead worker's unacked batches come back within the test.
    settings = settings.model_copy(update={"visibility_timeout_s": 15, "batch_messages": 8})
    ddb = prepare_tables(settings)
    load_file(ddb, settings.table, CORPORA / "notmuch-lkml.jsonl.gz", "crash")
    records = tmp_path / "stream.jsonl"
    export_stream(settings, records)
    table = table_messages(ddb, settings.table, "crash")

    run = ingestor(settings)
    with workers(settings) as procs:
        run.feed_all(read_sources([str(records)]))
        # Kill both whole workers (parent and pool child) while batches are in flight.
        first = run._sent[0].results[0]
        first.get(timeout=120)
        for proc in procs:
            os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait(timeout=30)
    with workers(settings):
        try:
            summary = run.wait(timeout_s=300)
        except CeleryTimeoutError:
            pytest.fail(f"not converged in 300 s; broker: {_broker_state(settings)}")
    assert summary.dead_lettered == 0
    assert summary.applied + summary.ignored == summary.read
    assert set(opensearch_docs(settings, "crash")) == set(table)
    assert wait_until(
        lambda: (
            len(qdrant_points(settings, "crash"))
            == sum(1 for m in table.values() if (m.get("forai") or "").strip())
        ),
        timeout=5,
    )
