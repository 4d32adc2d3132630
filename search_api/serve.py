"""``sidecar serve``: the API, and — with the embedded Qdrant store — its single owner.

The embedded store admits one process. With a Qdrant server (``SIDECAR_QDRANT_URL``) the API
is a plain uvicorn process and vectors workers run anywhere. In embedded mode the API process
is also the vectors consumer: the consumer the serve command passes (the Celery worker, solo
pool) runs in the main thread and uvicorn in a second thread, both using the same cached
Qdrant client; run ``sidecar worker --role fulltext`` beside it. Further API replicas on the
same host run with ``--no-vectors-consumer``: they serve full text and never open the store.

Prometheus metrics are served on their own port (``SIDECAR_API_METRICS_PORT``, bound to the
API's host) by prometheus-client's HTTP server, never on the API's port: a balancer that
forwards ``/*`` to the API exposes the search routes only.

This module knows the pipeline only through what it is given (``repairs``,
``consume_vectors``): ``search_api`` never imports ``indexer.pipeline``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import uvicorn
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from indexer.adapters.broker import QueueCollector
from indexer.logs import configure
from indexer.settings import Settings
from search_api.app import create_app
from search_api.http_limits import server_options
from search_api.repair import RepairSink

log = logging.getLogger("search_api")


class _Exposition(Collector):
    """This process's metrics (requests, repairs, the embedded vectors consumer's) plus the
    Redis-backed queue gauges, read at scrape time. Kept out of the process-wide registry so
    that creating apps (tests, several servers) never registers the queue gauges twice."""

    def __init__(self, settings: Settings) -> None:
        self._queues = QueueCollector(settings)

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()
        yield from self._queues.collect()


def metrics_registry(settings: Settings) -> CollectorRegistry:
    """What the API's metrics port serves (also read directly by in-process tests)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Exposition(settings))
    return registry


def serve_metrics(settings: Settings, host: str, port: int) -> Callable[[], None]:
    """Start the metrics server (a daemon thread); returns what stops it. A port another
    process holds (a second replica on the host) is logged as an error and the API serves on
    without metrics: losing a scrape target must not take search down."""
    if not port:
        return lambda: None
    try:
        server, _ = start_http_server(port, addr=host, registry=metrics_registry(settings))
    except OSError as exc:
        log.error("API metrics not served: %s:%d cannot be bound (%s)", host, port, exc)
        return lambda: None
    log.info("API metrics on http://%s:%d/metrics", host, port)
    return server.shutdown


def _server(
    settings: Settings, host: str, port: int, *, vectors: bool, repairs: RepairSink | None
) -> uvicorn.Server:
    app = create_app(settings, vectors=vectors, repairs=repairs)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            **server_options())  # type: ignore[arg-type]
    return uvicorn.Server(config)


def serve(
    settings: Settings,
    host: str,
    port: int,
    *,
    vectors_consumer: bool,
    repairs: RepairSink | None = None,
    consume_vectors: Callable[[], None] | None = None,
    metrics_port: int | None = None,
) -> None:
    """Embedded store without ``vectors_consumer``: an API replica beside the owner that never
    opens the store (full text only; vector modes answer 503). ``metrics_port``: default
    ``SIDECAR_API_METRICS_PORT``; 0 = none."""
    configure(logging.INFO, "search_api")
    vectors = vectors_consumer or not settings.qdrant_embedded
    server = _server(settings, host, port, vectors=vectors, repairs=repairs)
    stop_metrics = serve_metrics(
        settings, host, settings.api_metrics_port if metrics_port is None else metrics_port
    )
    try:
        if not (settings.qdrant_embedded and vectors_consumer and consume_vectors):
            server.run()
            return
        thread = threading.Thread(target=server.run, name="api", daemon=True)
        thread.start()
        try:
            consume_vectors()
        finally:
            server.should_exit = True
            thread.join(10)
    finally:
        stop_metrics()
