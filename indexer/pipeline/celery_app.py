"""The Celery application: Redis broker, JSON only, late acks, bounded redelivery window.

Configured from settings at import because the worker imports this module by name; nothing
heavy happens here (no client is built until a task runs).

The broker is one Redis (``redis://``, an ElastiCache primary endpoint included) or the
master Redis Sentinel names (``sentinel://``; URL and options from
:mod:`indexer.adapters.broker`). Losing it (a restart, a failover) is survived on both sides:
a worker reconnects for ever, asking the Sentinels again for the master each time; a sender
retries a publish briefly and then raises a transient error (the tailer feeds the page again;
a task lost with the old master is found and sent again by the ingestor's lost-task check).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from celery import Celery, signals

from indexer import otel
from indexer.adapters import broker
from indexer.adapters.aws import audit as aws_audit
from indexer.pipeline import celery_logs, context
from indexer.settings import Settings, get_settings

# How long a dead restorer's lock stops the redelivery of unacked tasks (kombu: 300 s).
UNACKED_MUTEX_EXPIRE_S = 30
# Publishing a task: up to 5 retries, 0.5 s apart growing to 1 s (about 3.5 s in all).
PUBLISH_RETRY_POLICY = {"max_retries": 5, "interval_start": 0, "interval_step": 0.5,
                        "interval_max": 1}


def configure(app: Celery, settings: Settings) -> None:
    url, sentinel = broker.celery_url(settings), broker.sentinel_options(settings)
    app.conf.update(
        broker_url=url,
        result_backend=url,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        worker_max_tasks_per_child=None,
        result_expires=24 * 3600,
        task_track_started=True,
        broker_connection_retry_on_startup=True,
        # A broker lost while running (a restart, a failover): reconnect, for ever (Celery's
        # default gives up, and the worker exits, after 100 tries).
        broker_connection_retry=True,
        broker_connection_max_retries=None,
        # A task running when the connection drops finishes and stores its result (the result
        # backend retries its writes); it is acknowledged on the new connection or, if that
        # ack is lost, redelivered after the visibility timeout (harmless: tasks are
        # idempotent). Cancelling it would only delay it by that timeout.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        # A sender (the tailer, ingest, the API's read-repair) retries a publish about 3 s and
        # then raises: the tailer backs off and feeds the page again; the API counts a
        # failed repair and answers the search.
        task_publish_retry=True,
        task_publish_retry_policy=PUBLISH_RETRY_POLICY,
        # The result store's reads and writes wait out a lost connection (a worker storing a
        # result, the tailer reading one) instead of failing at the first refusal: up to 30
        # tries with jittered backoff capped at 5 s, about a minute — a Sentinel failover takes
        # seconds, an ElastiCache one up to about a minute. Beyond that the task fails with no
        # result stored: the tailer feeds its page again, or the lost-task check resends it.
        result_backend_always_retry=True,
        result_backend_max_retries=30,
        result_backend_max_sleep_between_retries_ms=5000,
        broker_transport_options={
            # A task longer than this is redelivered while still running: batches are bounded.
            "visibility_timeout": settings.visibility_timeout_s,
            # Restore unacked messages of a dead worker soon after the visibility timeout.
            "unacked_restore_interval": 5,
            "unacked_restore_throttle": 1,
            # Restoring takes a lock in Redis that a worker SIGKILLed while holding it (an OOM
            # kill) leaves behind: kombu's default of 300 s stops every redelivery that long.
            # A restore takes milliseconds, and a second restorer is harmless (each message is
            # moved back in a transaction that checks it is still unacked).
            "unacked_mutex_expire": UNACKED_MUTEX_EXPIRE_S,
            # With Sentinel: the master's name and the Sentinels' login and timeouts.
            **sentinel,
        },
        result_backend_transport_options={
            "visibility_timeout": settings.visibility_timeout_s, **sentinel},
        task_default_queue=settings.fulltext_queue,
        worker_hijack_root_logger=False,
    )


def started_as_worker(argv: list[str]) -> bool:
    """This process is ``celery ... worker`` (``python -m celery`` or the ``celery`` script),
    not a sender that imports the app (the tailer, ingest, the API, a test runner)."""
    return bool(argv) and "celery" in (Path(argv[0]).name, Path(argv[0]).parent.name) and (
        "worker" in argv[1:])


if started_as_worker(sys.argv):  # before Celery writes anything: JSON lines from the first
    celery_logs.celery_worker_logs()

app = Celery("sidecar", include=["indexer.pipeline.tasks", "indexer.pipeline.contacts_task",
                             "indexer.pipeline.vector_admin"])
configure(app, get_settings())


def _declare_workers_role(**_: Any) -> None:
    """A Celery worker process makes the workers' AWS calls (its pool's children too); a
    process that only sends tasks (the tailer, ingest) keeps its own role."""
    aws_audit.declare(aws_audit.WORKERS)


signals.worker_init.connect(_declare_workers_role, weak=False)
signals.worker_process_init.connect(_declare_workers_role, weak=False)


def _worker_context(**_: Any) -> None:
    """Each worker process builds its tasks' context once (:mod:`.context`): settings read
    once, adapters opened on first use and kept, never per task."""
    context.install()


signals.worker_init.connect(_worker_context, weak=False)
signals.worker_process_init.connect(_worker_context, weak=False)


def _trace_worker(**_: Any) -> None:
    """Traces where ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set: in each pool child, after the
    fork (an exporter's thread started before it would not run in the child). A task's span
    continues the trace its sender put in the task's headers."""
    otel.setup("sidecar-worker")


def _flush_traces(**_: Any) -> None:
    """A pool child's last spans exported before it exits."""
    otel.flush()


signals.worker_process_init.connect(_trace_worker, weak=False)
signals.worker_process_shutdown.connect(_flush_traces, weak=False)


def _runs_tasks_itself(worker: Any) -> bool:
    """A worker whose pool runs tasks in its own process (threads: the contacts worker,
    :mod:`indexer.pipeline.workers`), where no pool child starts to set tracing up."""
    from celery.concurrency import get_implementation
    from celery.concurrency.thread import TaskPool

    pool = get_implementation(getattr(worker, "pool_cls", None) or "prefork")
    return isinstance(pool, type) and issubclass(pool, TaskPool)


def _trace_threads_worker(sender: Any = None, **_: Any) -> None:
    if _runs_tasks_itself(sender):
        otel.setup("sidecar-worker")


def _flush_threads_worker(sender: Any = None, **_: Any) -> None:
    if _runs_tasks_itself(sender):
        otel.flush()


signals.worker_init.connect(_trace_threads_worker, weak=False)
signals.worker_shutdown.connect(_flush_threads_worker, weak=False)


def _embedding_gives_way(instance: Any = None, **_: Any) -> None:
    """A worker consuming the vectors queue runs ``SIDECAR_VECTORS_NICE`` steps below normal
    CPU priority (its pool's children inherit it).

    Why: embedding is throughput-bound (seconds of CPU per batch, and it takes every core it
    is given) while a full-text task is latency-bound (tens of milliseconds). On a host both
    roles share (``sidecar worker``, the demo, a small VM), the scheduler then runs full-text
    work first and embedding in the time left, so new mail stays searchable within seconds
    under an embedding backlog (design invariant 5, the freshness runs in docs/results/runs/). In
    a container of its own (Helm, ECS) it changes nothing: priorities only order the
    processes that share a CPU quota.
    """
    settings = get_settings()
    queues = instance.app.amqp.queues.consume_from if instance is not None else None
    if settings.vectors_nice and queues and settings.vectors_queue in queues:
        os.nice(settings.vectors_nice)


signals.celeryd_after_setup.connect(_embedding_gives_way, weak=False)
