"""Prometheus metrics of every sidecar process, and how each process exposes them.

Definitions live here, beside nothing else, so adapters, the pipeline, the tailer and the API
import them without import cycles. Exposure:
- ``sidecar serve``: ``GET /metrics`` on the API's port (no token: it carries counts, queue
  names and shard ids, never mail content, mailbox ids or message keys);
- ``sidecar tail``: its own HTTP server on ``SIDECAR_METRICS_PORT`` (0 = off);
- ``sidecar worker``: Celery's prefork children count in Prometheus's multiprocess mode
  (files under a directory the supervisor creates), and the supervisor serves their sum on
  ``SIDECAR_METRICS_PORT``.
Queue depths and the dead-letter count are read from Redis at scrape time by
:class:`indexer.adapters.broker.QueueCollector` (passed in by each command, so this module
imports no adapter), so every process reports the same current values.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from indexer.settings import Settings

log = logging.getLogger(__name__)

RECORDS_READ = Counter(
    "sidecar_records_read_total", "Stream records read (tail, backfill, ingest) and fed in."
)
RECORDS_APPLIED = Counter(
    "sidecar_records_applied_total", "Records whose messages were applied to both indexes."
)
RECORDS_DEAD_LETTERED = Counter(
    "sidecar_records_dead_lettered_total",
    "Records dead-lettered: undecodable, or naming a message that an index rejected.",
)
GAPS = Counter(
    "sidecar_stream_gaps_total",
    "Stream records that expired before the tailer read them (run `sidecar backfill`).",
)
TASKS_RESENT = Counter(
    "sidecar_tasks_resent_total",
    "Tasks sent again because the broker had lost them (neither queued nor unacked, never "
    "started, at two looks in a row), by stage.",
    ["stage"],
)
MESSAGES = Counter(
    "sidecar_worker_messages_total",
    "Messages a worker synced, by stage (fulltext, vectors) and outcome "
    "(applied, dead_lettered, retried).",
    ["stage", "outcome"],
)
REWRITTEN = Counter(
    "sidecar_sync_rewritten_total",
    "Messages a worker wrote again because its verify read found the table changed since "
    "the read its write used, by stage: a stale eventually consistent first read "
    "(SIDECAR_FIRST_READ=eventual) or a concurrent change. Against "
    "sidecar_worker_messages_total{outcome=\"applied\"}, what eventual first reads cost.",
    ["stage"],
)
BULK_ERRORS = Counter(
    "sidecar_opensearch_bulk_errors_total",
    "OpenSearch bulk failures by class: rejected_429 and server_5xx (retried), client_4xx "
    "(the message is dead-lettered), connection (the whole bulk call is retried).",
    ["error_class"],
)
CONFIG_ERRORS = Counter(
    "sidecar_config_errors_total",
    "Batches an engine refused the sidecar's credentials or permissions for (401/403), by "
    "component (opensearch, qdrant): retried with backoff until fixed, never dead-lettered.",
    ["component"],
)
STALLED = Gauge(
    "sidecar_stalled",
    "1 while a component refuses the sidecar (401/403) and batches wait; 0 after the next "
    "batch it accepted (the latest value any worker process set).",
    ["component"],
    multiprocess_mode="livemostrecent",
)
EMBED_BATCH = Histogram(
    "sidecar_embed_batch_size",
    "Texts per embedding call (only texts neither the point nor the cache had).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
)
EMBED_SECONDS = Histogram(
    "sidecar_embed_seconds",
    "Seconds per embedding call.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
QUERY_ENCODE_SECONDS = Histogram(
    "sidecar_query_encode_seconds",
    "Seconds a search request waited for its query's vector: the wait for the query encoder "
    "and its pass (issue 42: <= 30 ms at p99 while documents are encoded in the process).",
    # fine around the 30 ms target: a p99 is only known to lie within its bucket
    buckets=(0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.065,
             0.08, 0.1, 0.25, 0.5, 1, 2.5),
)
EMBEDDED_TEXTS = Counter("sidecar_embedded_texts_total", "Texts embedded (rate = texts/s).")
API_REPAIRS = Counter(
    "sidecar_api_repairs_total",
    "Read-repairs of stale hits: requested, deduplicated (asked within the window), failed.",
    ["outcome"],
)
MALFORMED_FIELDS = Counter(
    "sidecar_api_malformed_fields_total",
    "Hot-row fields the API could not read and showed as null (the writer's data), by field.",
    ["field"],
)
INDEX_MAPPING_VERSION = Gauge(
    "sidecar_index_mapping_version",
    "OpenSearch mapping versions: target=\"code\" the one this process's code creates and "
    "writes (MAPPING_VERSION), target=\"live\" the oldest index behind the read alias (set "
    "each time the API's mapping check looks). live < code after an upgrade: run `sidecar "
    "reindex` (docs/operations/upgrading.md).",
    ["target"],
    multiprocess_mode="livemin",
)
API_COMPONENT_READY = Gauge(
    "sidecar_api_component_ready",
    "Whether each component the API uses answered its last /readyz check (1) or not (0); "
    "the failure's detail is in the API's log (the public /readyz shows a fixed code only).",
    ["component"],
    multiprocess_mode="livemin",
)
API_LATENCY = Histogram(
    "sidecar_api_request_seconds",
    "API request latency by route template, search mode and status code.",
    ["route", "mode", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)


def bulk_error_class(status: int) -> str:
    if status == 429:
        return "rejected_429"
    if status >= 500 or status == 0:
        return "server_5xx"
    return "client_4xx"


def epoch_seconds(value: Any) -> float | None:
    """A record's ``ApproximateCreationDateTime``: datetime (boto3), seconds or milliseconds."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value) / 1000 if value > 1e11 else float(value)
    return None


class ShardLag(Collector):
    """Indexing lag per stream reader and shard: now − ApproximateCreationDateTime of the last
    record the reader applied from the shard.

    Computed at scrape time, so a stuck shard's lag grows while nothing is applied; 0 once a
    read came back empty (the shard is caught up: an idle stream is not a lagging one). Each
    reader (``all``, or ``fulltext`` / ``vectors``: ``sidecar tail --stage``) has its own
    position, so each has its own lag.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], float] = {}
        self._caught_up: set[tuple[str, str]] = set()

    def applied(self, shard_id: str, created: Any, reader: str = "all") -> None:
        seconds = epoch_seconds(created)
        with self._lock:
            if seconds is not None:
                self._last[(reader, shard_id)] = seconds
            self._caught_up.discard((reader, shard_id))

    def caught_up(self, shard_id: str, reader: str = "all") -> None:
        with self._lock:
            self._last.setdefault((reader, shard_id), time.time())
            self._caught_up.add((reader, shard_id))

    def behind(self, shard_id: str, reader: str = "all") -> None:
        with self._lock:
            self._caught_up.discard((reader, shard_id))

    def forget(self, shard_id: str, reader: str = "all") -> None:
        with self._lock:
            self._last.pop((reader, shard_id), None)
            self._caught_up.discard((reader, shard_id))

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "sidecar_stream_lag_seconds",
            "Now minus the creation time of the last record a reader applied from a shard "
            "(0 when caught up).",
            labels=["reader", "shard"],
        )
        now = time.time()
        with self._lock:
            for key, created in sorted(self._last.items()):
                value = 0.0 if key in self._caught_up else max(0.0, now - created)
                lag.add_metric(list(key), value)
        yield lag


STREAM_LAG = ShardLag()
REGISTRY.register(STREAM_LAG)


def serve_process_metrics(settings: Settings, port: int, queues: Collector) -> None:
    """This process's metrics plus the queue gauges on ``port`` (a daemon thread)."""
    REGISTRY.register(queues)
    start_http_server(port, addr=settings.metrics_host)
    log.info("metrics on http://%s:%d/metrics", settings.metrics_host, port)


def serve_multiprocess_metrics(
    settings: Settings, port: int, directory: str, queues: Collector
) -> None:
    """The sum of every process writing under ``directory`` (Celery children), on ``port``."""
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    registry.register(queues)
    start_http_server(port, addr=settings.metrics_host, registry=registry)
    log.info("worker metrics on http://%s:%d/metrics", settings.metrics_host, port)
