"""OpenTelemetry traces, opt-in: "why is this message not searchable yet?" answered by one
trace from the command that read a record, through the task that indexed it, to the engine.

On only where ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is
set and the ``[otel]`` extra is installed. Otherwise nothing here imports an OpenTelemetry
module, and the SDK is kept out of the process altogether
(:func:`indexer.otel_guard.keep_sdk_out`, installed when the ``indexer`` package is imported):
redis-py 8 imports the SDK's metrics whenever it is installed
(``redis/observability/providers.py`` line 32, ``from opentelemetry.sdk.metrics import
MeterProvider`` in a ``try``), ~60 modules in every process for an opt-in feature of redis the
sidecar never turns on. What remains is the bare API, imported by two dependencies: redis-py
(``redis/observability/metrics.py`` line 37, ``from opentelemetry.metrics import Meter``, in a
``try``) and, in the API's process, FastAPI 0.163, of which ``opentelemetry-api`` is a hard
dependency (``fastapi/telemetry/_api.py`` lines 9-13, ``_asgi.py`` 17-22: context, logs,
metrics, trace, propagate; not guarded, so it cannot be refused).
``tests/integration/test_otel_off.py`` runs the real processes and reads what they imported.

What is traced, once :func:`setup` ran in a process:
- the API (FastAPI: a server span per request, :func:`instrument_app`);
- Celery: publishing a task injects the trace context into the task's headers, the worker
  continues it (a span per task). Workers set it up in ``worker_process_init`` — each pool
  child after the fork, since an exporter's thread does not survive one;
- botocore (DynamoDB, Streams, S3), redis (the broker and result store), and the engines'
  HTTP clients: urllib3 under opensearch-py, httpx under qdrant-client (a Qdrant server);
- a finite command (``ingest``, ``backfill``, ``reindex``...) runs inside one span of its own
  (:func:`command_span`), so every task it sends is a child of one trace. Long-running roles
  (``tail``, ``worker``, ``serve``) have none: each task they send starts its own trace.

The standard ``OTEL_*`` variables configure the rest (``OTEL_SERVICE_NAME``,
``OTEL_TRACES_SAMPLER``, ``OTEL_EXPORTER_OTLP_HEADERS``...): the exporter is OTLP over HTTP.
Log lines carry ``trace_id``/``span_id`` of the current span (:mod:`indexer.logs`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from indexer import logs
from indexer.otel_guard import let_sdk_in, wanted

if TYPE_CHECKING:
    from fastapi import FastAPI
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)

TRACER = "mail-search-sidecar"
_lock = threading.Lock()
_active = False


def active() -> bool:
    """Tracing is set up in this process."""
    return _active


def setup(service: str, exporter: SpanExporter | None = None) -> bool:
    """Trace this process (once; later calls return at once): a tracer provider exporting
    to the OTLP endpoint — or to ``exporter``, synchronously (tests) — and the libraries'
    instrumentation. Returns whether tracing is on. Without an endpoint or an exporter,
    nothing is imported and False is returned; with one but without the ``[otel]`` extra, one
    warning and False (the process runs on untraced)."""
    global _active
    if _active:
        return True
    if exporter is None and not wanted():
        return False
    with _lock:
        if _active:
            return True
        let_sdk_in()
        try:
            _install(service, exporter)
        except ImportError as exc:
            log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but tracing is off: %s (install "
                        "mail-search-sidecar[otel])", exc)
            return False
        _active = True
    logs.add_fields_source(_trace_fields)
    return True


def _install(service: str, exporter: SpanExporter | None) -> None:
    from opentelemetry import trace
    from opentelemetry.instrumentation.botocore import BotocoreInstrumentor
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.instrumentation.urllib3 import URLLib3Instrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or service})
    provider = TracerProvider(resource=resource)
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    botocore = BotocoreInstrumentor()  # type: ignore[no-untyped-call]
    celery = CeleryInstrumentor()  # type: ignore[no-untyped-call]
    for instrumentor in (botocore, celery, RedisInstrumentor(), URLLib3Instrumentor(),
                         HTTPXClientInstrumentor()):
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(tracer_provider=provider)


def instrument_app(app: FastAPI) -> None:
    """A server span per request of the API, when tracing is on."""
    if not _active:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz")


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[None]:
    """A span of the sidecar's own around a block, when tracing is on (else nothing)."""
    if not _active:
        yield
        return
    from opentelemetry import trace

    with trace.get_tracer(TRACER).start_as_current_span(name, attributes=attributes):
        yield


def command_span(name: str) -> Callable[[], None]:
    """Start the span of a finite CLI command as the current one; returns what ends it."""
    if not _active:
        return lambda: None
    from opentelemetry import context, trace

    started = trace.get_tracer(TRACER).start_span(f"sidecar {name}")
    token = context.attach(trace.set_span_in_context(started))

    def end() -> None:
        context.detach(token)
        started.end()
        flush()

    return end


def flush(timeout_ms: int = 5000) -> None:
    """Export what is buffered (a command about to exit, a worker child about to stop)."""
    if not _active:
        return
    from opentelemetry import trace

    flush_spans = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush_spans is not None:
        flush_spans(timeout_ms)


def _trace_fields() -> dict[str, str]:
    """``trace_id``/``span_id`` of the current span, for the log line being written."""
    from opentelemetry import trace

    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")}
