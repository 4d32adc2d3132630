"""Scale-out on one stack: two full-text workers on one queue and two API processes give the
same answers, and no task is done twice (docs/operations/scaling.md).

What runs: ``sidecar worker --role fulltext`` twice (each its own Celery worker on the same
queue, each serving ``/metrics``); API process A, ``sidecar serve``, which in embedded mode is
also the vectors consumer and the one owner of the Qdrant store; API process B,
``sidecar serve --no-vectors-consumer``, a replica that never opens the store. The 40 demo
emails go through the real ingest path in tasks of 4 messages.

Shown: every full-text task was applied once in all: the workers' applied counters sum to
the message syncs the tasks carried (about 53 for the 40 messages: a message's records may
straddle two batches, and each batch re-reads it), both workers did some, and the index holds
the 40 documents; full-text results (pages, and a cursor handed from one process to the
other) are identical from A and B; a second ingest of the same records embeds nothing.

The limit, honestly: the embedded Qdrant store admits one process, so here only A answers
semantic and hybrid (B answers 503 with Retry-After, and its /readyz skips Qdrant), and there
is one vectors consumer. Scaling vectors out takes ``SIDECAR_QDRANT_URL`` (a Qdrant server or
cluster): ``tests/integration/test_qdrant_server_e2e.py`` runs two vectors workers on a real
server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from indexer.adapters.aws import clients as aws
from indexer.pipeline.dispatch import celery_send, decode_dead_letter
from indexer.pipeline.ingest import Ingestor, IngestSummary, Pending
from indexer.settings import Settings, to_env
from indexer.sources.files import read_sources
from search_api.auth import token_hash
from sidecar_tools.writer.files import load_file
from tests.support.api_fixtures import free_port
from tests.support.ops_helpers import SAMPLE
from tests.support.pipeline_helpers import (
    export_stream,
    opensearch_docs,
    prepare_tables,
    wait_until,
)

TOKEN = "scale-out-token"
APPLIED = ("sidecar_worker_messages_total", (("outcome", "applied"), ("stage", "fulltext")))
RETRIED = ("sidecar_worker_messages_total", (("outcome", "retried"), ("stage", "fulltext")))
VECTORS = ("sidecar_worker_messages_total", (("outcome", "applied"), ("stage", "vectors")))
EMBEDDED = ("sidecar_embedded_texts_total", ())
QUERIES: list[dict[str, Any]] = [
    {"q": "release"},
    {"q": "checkout outage"},
    {"q": "from:priya.natarajan@northwind.example"},
    {"q": "lisbon OR tart", "sort": "date"},
    {"q": "subject:budget -draft"},
    {"q": '"checkout API"', "collapse": "thread"},
    {"q": "interview", "limit": 3},
]


def _samples(port: int, path: str = "/metrics") -> dict[tuple[str, Any], float]:
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=15).text
    except httpx.HTTPError:
        return {}
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _consumers() -> Counter[str]:
    """Workers consuming each queue of the broker (Celery remote control)."""
    from indexer.pipeline.celery_app import app

    replies = app.control.inspect(timeout=1.0).active_queues() or {}
    return Counter(q["name"] for qs in replies.values() for q in qs)


class Stack:
    """The processes of one test: two full-text workers, API A (store owner), API B."""

    def __init__(self, settings: Settings, tmp: Path) -> None:
        self.settings = settings
        self.env = {
            **os.environ,
            **to_env(settings),
            "HF_HUB_OFFLINE": "1",
            "SIDECAR_API_TOKENS": json.dumps({token_hash(TOKEN): [MAILBOX]}),
            "SIDECAR_CURSOR_KEY": "scale-out-test-shared-cursor-key",  # replicas share it
        }
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.worker_ports = [free_port(), free_port()]
        self.api_ports = [free_port(), free_port()]
        self.api_metrics_ports = [free_port(), free_port()]  # the API's own metrics port
        self.startup_s = 0.0

    def _spawn(self, name: str, *args: str) -> None:
        log = (self.tmp / f"{name}.log").open("wb")
        self.procs.append(subprocess.Popen(
            [sys.executable, "-m", "indexer.cli.main", *args],
            env=self.env, stdout=log, stderr=log, start_new_session=True,
        ))

    def start(self) -> None:
        for n, port in enumerate(self.worker_ports):
            self._spawn(f"worker{n}", "worker", "--role", "fulltext", "--loglevel", "WARNING",
                        "--metrics-port", str(port))
        (a, b), (ma, mb) = self.api_ports, self.api_metrics_ports
        self._spawn("api-a", "serve", "--port", str(a), "--metrics-port", str(ma))
        self._spawn("api-b", "serve", "--port", str(b), "--metrics-port", str(mb),
                    "--no-vectors-consumer")

    def ready(self) -> bool:
        def up(port: int) -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).is_success
            except httpx.HTTPError:
                return False

        if not all(map(up, self.api_ports)) or not all(map(_samples, self.worker_ports)):
            return False
        # Both full-text workers consume before any task is sent (else one may take them
        # all); the vectors consumer (A) may start later: its tasks wait in the queue.
        return _consumers()[self.settings.fulltext_queue] == 2

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def search(self, api: int, **params: Any) -> httpx.Response:
        url = f"http://127.0.0.1:{self.api_ports[api]}/v1/mailboxes/{MAILBOX}/search"
        auth = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.get(url, params=params, headers=auth, timeout=60)

    def applied(self) -> list[float]:
        return [_samples(port).get(APPLIED, 0.0) for port in self.worker_ports]


MAILBOX = "scale@example.com"


@pytest.fixture
def stack(settings: Settings, tmp_path: Path) -> Iterator[Stack]:
    small = settings.model_copy(update={"batch_messages": 4})  # many tasks for two workers
    ddb = prepare_tables(small)
    loaded = load_file(ddb, small.table, SAMPLE, MAILBOX)
    assert loaded.stored == 40, loaded
    running = Stack(small, tmp_path)
    started = time.monotonic()
    running.start()
    try:
        assert wait_until(running.ready, timeout=120, interval=1), "processes did not start"
        running.startup_s = time.monotonic() - started
        yield running
    finally:
        running.stop()


def _ingest(settings: Settings, records: Path, sent: Counter[str]) -> IngestSummary:
    """The real ingest path, counting the messages each stage's tasks carry."""
    base = celery_send(settings)

    def send(stage: str, payload: dict[str, Any]) -> Pending:
        sent[stage] += len(payload["messages"])
        return base(stage, payload)

    run = Ingestor(send, decode_dead_letter(settings), settings.batch_messages)
    run.feed_all(read_sources([str(records)], aws.client(settings, "s3")))
    return run.wait(300)


def _same_answer(stack: Stack, params: dict[str, Any]) -> bool:
    a, b = (stack.search(api, mode="fulltext", **params) for api in (0, 1))
    assert a.status_code == b.status_code == 200, (params, a.text, b.text)
    assert a.json()["hits"], params
    return bool(a.json() == b.json())


def _same_everywhere(stack: Stack) -> None:
    for params in QUERIES:
        # Scores follow the index's statistics, which a background merge may shift between
        # the two requests just after a re-index: equal on a retry then.
        assert wait_until(partial(_same_answer, stack, params), timeout=10), params
    query = {"q": "release OR outage OR lisbon", "limit": 5}
    cursor = stack.search(0, **query).json()["next_cursor"]  # from A, paged on B: stateless
    assert cursor

    def same_page() -> bool:  # the same allowance for a background merge as above
        pages = [stack.search(api, cursor=cursor, **query).json() for api in (0, 1)]
        return bool(pages[0] == pages[1] and pages[0]["hits"])

    assert wait_until(same_page, timeout=10)


@pytest.mark.stack
@pytest.mark.slow
def test_two_workers_two_apis(stack: Stack, tmp_path: Path) -> None:
    settings = stack.settings
    records = tmp_path / "stream.jsonl"
    export_stream(settings, records)
    sent: Counter[str] = Counter()
    began = time.monotonic()
    first = _ingest(settings, records, sent)
    first_s = time.monotonic() - began
    assert first.dead_lettered == 0 and first.embedded > 0, first
    assert sent["fulltext"] >= 40 and first.batches >= 10

    # No double work: each full-text message sent was applied once, by one of the two.
    assert wait_until(lambda: sum(stack.applied()) >= sent["fulltext"], timeout=30)
    per_worker = stack.applied()
    # A batch an engine failed transiently is retried (its messages count as ``retried``,
    # not ``applied``): repeated work after a failure, on a shared machine, not double work.
    retried = sum(_samples(p).get(RETRIED, 0.0) for p in stack.worker_ports)
    seen = (per_worker, sent, retried)
    assert sum(per_worker) == sent["fulltext"] and min(per_worker) > 0, seen
    owner = _samples(stack.api_metrics_ports[0])
    assert owner.get(VECTORS) == sent["vectors"], (owner.get(VECTORS), sent)
    embedded = owner[EMBEDDED]  # the owner embeds texts (and, below, queries)
    assert embedded == first.embedded, (embedded, first)
    assert len(opensearch_docs(settings, MAILBOX)) == 40

    _same_everywhere(stack)
    for mode in ("semantic", "hybrid"):
        answer = stack.search(0, q="flights to the offsite", mode=mode)
        assert answer.status_code == 200 and answer.json()["hits"], answer.text
        replica = stack.search(1, q="flights to the offsite", mode=mode)
        assert replica.status_code == 503 and replica.headers["Retry-After"] == "5"
        assert replica.json() == {"detail": "qdrant is unavailable"}
    ready = [httpx.get(f"http://127.0.0.1:{p}/readyz", timeout=10).json() for p in stack.api_ports]
    assert ready[0] == {"ready": True, "failing": [], "skipped": [],
                        "serving": ["fulltext", "semantic"]}
    assert ready[1] == {"ready": True, "failing": [], "skipped": ["qdrant"],
                        "serving": ["fulltext"]}

    # Re-delivery of every record: applied again once each, nothing embedded.
    queries_embedded = _samples(stack.api_metrics_ports[0])[EMBEDDED]
    began = time.monotonic()
    again = _ingest(settings, records, sent)
    again_s = time.monotonic() - began
    assert again.dead_lettered == 0 and again.embedded == 0, again
    assert wait_until(lambda: sum(stack.applied()) >= sent["fulltext"], timeout=30)
    assert sum(stack.applied()) == sent["fulltext"]
    assert _samples(stack.api_metrics_ports[0])[EMBEDDED] == queries_embedded
    _same_everywhere(stack)
    print(f"scale-out: full-text applied per worker {per_worker} of {sent['fulltext'] // 2} "
          f"sent in {first.batches} tasks, then {stack.applied()} after the re-ingest; vectors "
          f"{sent['vectors']} sent, {embedded:.0f} embedded once; {retried:.0f} retried; "
          f"start-up {stack.startup_s:.1f} s, "
          f"ingest {first_s:.1f} s, re-ingest {again_s:.1f} s")
