"""The Celery application: Redis broker, JSON only, late acks, bounded redelivery window.

Configured from settings at import because the worker imports this module by name; nothing
heavy happens here (no client is built until a task runs).
"""

from __future__ import annotations

from typing import Any

from celery import Celery, signals

from indexer.adapters import aws_audit
from indexer.settings import Settings, get_settings

# How long a dead restorer's lock stops the redelivery of unacked tasks (kombu: 300 s).
UNACKED_MUTEX_EXPIRE_S = 30


def configure(app: Celery, settings: Settings) -> None:
    app.conf.update(
        broker_url=settings.redis_url,
        result_backend=settings.redis_url,
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
        },
        result_backend_transport_options={"visibility_timeout": settings.visibility_timeout_s},
        task_default_queue=settings.fulltext_queue,
        worker_hijack_root_logger=False,
    )


app = Celery("sidecar", include=["indexer.pipeline.tasks", "indexer.pipeline.vector_admin"])
configure(app, get_settings())


def _declare_workers_role(**_: Any) -> None:
    """A Celery worker process makes the workers' AWS calls (its pool's children too); a
    process that only sends tasks (the tailer, ingest) keeps its own role."""
    aws_audit.declare(aws_audit.WORKERS)


signals.worker_init.connect(_declare_workers_role, weak=False)
signals.worker_process_init.connect(_declare_workers_role, weak=False)
