"""A worker SIGKILLed mid-batch loses nothing: after a restart everything converges; a task the
broker lost is sent again."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import redis
from celery.exceptions import TimeoutError as CeleryTimeoutError
from prometheus_client import REGISTRY

from indexer.adapters.broker import lost_task_check
from indexer.pipeline.dispatch import celery_send, decode_dead_letter, ingestor
from indexer.pipeline.ingest import Ingestor
from indexer.settings import Settings
from indexer.sources.files import read_sources
from sidecar_tools.writer.files import load_file
from tests.conftest import CORPORA
from tests.support.ops_helpers import SAMPLE
from tests.support.pipeline_helpers import (
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
        first = run._sent[0].results[0].pending
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


def test_a_task_the_broker_lost_is_sent_again(settings: Settings, tmp_path: Path) -> None:
    """The loss a SIGKILL between kombu's pop and its unacked write leaves: a task in neither
    the queue nor the unacked hash. Made here by emptying the full-text queue before any
    worker runs; the ingestor finds those tasks gone and sends them again, and only them (the
    vectors tasks wait in their queue meanwhile, or in flight, and are not sent twice)."""
    settings = settings.model_copy(update={"batch_messages": 10})
    ddb = prepare_tables(settings)
    load_file(ddb, settings.table, SAMPLE, "demo@example.com")
    records = tmp_path / "stream.jsonl"
    export_stream(settings, records)
    table = table_messages(ddb, settings.table, "demo@example.com")

    run = Ingestor(celery_send(settings), decode_dead_letter(settings), settings.batch_messages,
                   lost=lost_task_check(settings), lost_check_s=2.0)
    run.feed_all(read_sources([str(records)]))
    client = redis.Redis.from_url(settings.redis_url)
    dropped = client.llen(settings.fulltext_queue)
    assert dropped == run.summary.batches > 1
    client.delete(settings.fulltext_queue)
    before = REGISTRY.get_sample_value("sidecar_tasks_resent_total", {"stage": "fulltext"}) or 0
    with workers(settings):
        summary = run.wait(timeout_s=300)
    assert summary.resent == dropped
    after = REGISTRY.get_sample_value("sidecar_tasks_resent_total", {"stage": "fulltext"})
    assert after == before + dropped
    assert summary.dead_lettered == 0 and summary.applied + summary.ignored == summary.read
    assert set(opensearch_docs(settings, "demo@example.com")) == set(table)
