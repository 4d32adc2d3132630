"""Celery tasks: JSON in, JSON out; they only wire the sync core to this process's adapters.

Failures are classified once, by the engines' adapters (:mod:`indexer.adapters.errors`). A
transient one (an engine down, throttled, a network error) is retried with exponential backoff
and jitter for as long as the outage lasts, up to ``transient_retry_budget_s`` after the batch
first failed: an OpenSearch restart must not turn healthy mail into dead letters. Anything
unexpected is retried ``max_retries`` times. After that, or at once for poison, each message
goes to the dead-letter store with its reason, so one bad message never blocks the queue and
nothing is silently dropped.

A configuration error (an engine refused the sidecar's credentials: 401/403) is retried with
the same backoff but no deadline, and never dead-lettered: every message of a misconfigured
rollout would fail alike, and dead-lettering them would let the stream reader checkpoint past
them. Each attempt logs what to fix and counts ``sidecar_config_errors_total``;
``sidecar_stalled`` is 1 until a batch of that stage succeeds again.

Celery's own retry limit is off (``max_retries=None``): these rules bound the retries, not a
count of 3 that would end a long outage as a failed task (neither applied nor dead-lettered).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, NoReturn

from celery import Task
from celery.exceptions import Ignore

from indexer.adapters.errors import classify
from indexer.core.errors import ConfigurationError, ErrorKind
from indexer.core.plan import MessageRef
from indexer.core.retry import backoff_seconds
from indexer.core.task_payload import TaskPayload
from indexer.metrics import CONFIG_ERRORS, MESSAGES, REWRITTEN, STALLED
from indexer.pipeline import context
from indexer.pipeline.celery_app import app
from indexer.pipeline.celery_logs import celery_json_logs
from indexer.pipeline.contacts_sync import fulltext_sink
from indexer.pipeline.contacts_task import defer_to
from indexer.pipeline.deployment import REFUSE_WINDOW_S, REQUEUE_DELAY_S, log_refusal, mismatch
from indexer.pipeline.envelope import Envelope
from indexer.pipeline.sync import Outcome, sync_fulltext
from indexer.pipeline.vector_sync import sync_vector_targets

log = logging.getLogger(__name__)
celery_json_logs()

ENGINE_OF = {"fulltext": "opensearch", "vectors": "qdrant"}  # the sink each stage writes


def _task_payload_of(ref: MessageRef) -> dict[str, Any]:
    """What a redrive resends for one message: its ref only. Participant refs are left out
    (their keys hold addresses); the resent task re-reads the message and its stored
    participants."""
    return TaskPayload.of([ref]).to_json()


def _finish(
    stage: str, outcome: Outcome, refs: list[MessageRef], seconds: float = 0.0,
) -> dict[str, Any]:
    dlq = context.current().dead_letters
    MESSAGES.labels(stage, "applied").inc(len(outcome.applied))
    MESSAGES.labels(stage, "dead_lettered").inc(len(outcome.poison))
    REWRITTEN.labels(stage).inc(outcome.rewritten)
    for ref, reason in outcome.poison.items():
        dlq.add(
            stage=stage,
            reason=reason,
            payload=_task_payload_of(ref),
            mailbox_id=ref.mailbox_id,
        )
    return {
        "stage": stage,
        "applied": len(outcome.applied),
        "dead_lettered": [r.to_json() for r in outcome.poison],
        "embedded": outcome.embedded,
        "messages": len(refs),
        "seconds": round(seconds, 6),  # the batch's work, as the worker timed it
        "embed_s": round(outcome.embed_s, 6),
    }


def _refuse(task: Task, stage: str, envelope: Envelope, reason: str) -> dict[str, Any]:
    """Another deployment's task: back on its queue under the same id (so its sender gets
    the real result), or — refused for too long — dead-lettered naming both deployments."""
    log_refusal(reason)
    since = envelope.refused_since or time.time()
    refs = envelope.messages
    if time.time() - since >= REFUSE_WINDOW_S:
        return _finish(stage, Outcome(poison=dict.fromkeys(refs, reason)), refs)
    queue = (task.request.delivery_info or {}).get("routing_key")
    # Wait here, then publish for immediate delivery: a worker already blocked on the queue
    # (Redis serves the longest-waiting one) takes it. A countdown would instead hand it, as
    # an ETA task, to whichever worker polls first, and two workers of two deployments could
    # pass each other's tasks back and forth for ever.
    time.sleep(random.uniform(0.5, 1.5) * REQUEUE_DELAY_S)
    task.apply_async(args=[envelope.refused(since)], task_id=task.request.id, queue=queue)
    raise Ignore()


def _run(
    task: Task, stage: str, envelope: Envelope, work: Callable[[], Outcome]
) -> dict[str, Any]:
    refs = envelope.messages
    settings = context.current().settings
    refused = mismatch(settings, envelope.deployment)
    if refused:
        return _refuse(task, stage, envelope, refused)
    started = time.perf_counter()
    try:
        outcome = work()
        STALLED.labels(ENGINE_OF.get(stage, stage)).set(0)  # its engine accepts us (again)
        return _finish(stage, outcome, refs, time.perf_counter() - started)
    except Exception as exc:
        kind = classify(exc)
        if kind is ErrorKind.CONFIG:
            _stall(task, stage, envelope, exc)
        transient = kind is ErrorKind.TRANSIENT
        first_failure = envelope.first_failure or time.time()
        if kind is not ErrorKind.POISON and (
            time.time() - first_failure < settings.transient_retry_budget_s
            if transient
            else task.request.retries < settings.max_retries
        ):
            delay = backoff_seconds(task.request.retries, cap=settings.retry_backoff_max_s)
            MESSAGES.labels(stage, "retried").inc(len(refs))
            log.warning(
                "%s batch failed (%s), retry in %.1fs: %s", stage, type(exc).__name__, delay, exc
            )
            again = envelope.retried(first_failure)
            raise task.retry(args=(again,), exc=exc, countdown=delay) from exc
        reason = f"gave up after {task.request.retries} retries ({kind}): {exc}"
        return _finish(stage, Outcome(poison=dict.fromkeys(refs, reason)), refs)


def _stall(task: Task, stage: str, envelope: Envelope, exc: Exception) -> NoReturn:
    """Retry a batch an engine refused the sidecar for, with backoff and no deadline.

    The transient budget's clock is dropped: time spent waiting for an operator is not an
    outage, and a real outage after the fix gets its full budget.
    """
    settings = context.current().settings
    if isinstance(exc, ConfigurationError):
        component = exc.component or stage
    elif isinstance(exc, ImportError):
        component = "install"  # a module the code needs is missing from this environment
    else:
        component = ENGINE_OF.get(stage, stage)
    delay = backoff_seconds(task.request.retries, cap=settings.retry_backoff_max_s)
    CONFIG_ERRORS.labels(component).inc()
    STALLED.labels(component).set(1)
    MESSAGES.labels(stage, "retried").inc(len(envelope.messages))
    log.error(
        "%s batch stalled, not dead-lettered (attempt %d, retry in %.1fs): %s",
        stage, task.request.retries + 1, delay, exc,
    )
    again = envelope.retried(None)  # the budget's clock dropped: no outage
    raise task.retry(args=(again,), exc=exc, countdown=delay) from exc


@app.task(bind=True, name="sidecar.fulltext", acks_late=True, reject_on_worker_lost=True,
          max_retries=None)
def fulltext(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Sync a batch of messages (and participant items) into the full-text index."""
    ctx, envelope = context.current(), Envelope.of(payload)
    task = envelope.task
    return _run(
        self,
        "fulltext",
        envelope,
        lambda: sync_fulltext(
            ctx.store, fulltext_sink(ctx.settings, defer_to(ctx.settings)),
            list(task.messages), list(task.participants),
            eventual=task.first_read_eventual(ctx.settings.first_read),
        ),
    )


@app.task(bind=True, name="sidecar.vectors", acks_late=True, reject_on_worker_lost=True,
          max_retries=None)
def vectors(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Sync a batch of messages into the vector index (embedding only unseen text)."""
    ctx, envelope = context.current(), Envelope.of(payload)
    task = envelope.task
    return _run(
        self,
        "vectors",
        envelope,
        lambda: sync_vector_targets(ctx.settings, list(task.messages),
                                    eventual=task.first_read_eventual(ctx.settings.first_read)),
    )
