"""``sidecar.contacts``: a full-text batch's contacts, recounted after the batch.

A full-text task's sink does not wait for its writes to be searchable
(:mod:`indexer.pipeline.contacts_sync`): it publishes one of these per mailbox it moved, on
the contacts queue (``<prefix>.contacts``), before the batch is acknowledged; the task waits
for the writes to be searchable and recounts. That wait is most of a recount (~0.3 s of the
index's 0.5 s refresh, a few milliseconds of work), so the full-text role consumes the queue
with a pool of threads (:mod:`indexer.pipeline.workers`): on the full-text queue, recounts held
the batches' processes while they waited and made the next batches queue behind them
(docs/results/runs/2026-12-05-freshness-fresh-three.md). A recount published by an earlier
release on the full-text queue is still run there. Published without a countdown: a Celery
worker holds a task due later as an unacknowledged message, and with one in hand a Redis
restart crashed the worker (kombu's ``restore_unacked`` on the lost connection:
"'NoneType' object has no attribute 'hostname'"; ``test_tail_redis_restart``).

Retried as a batch is (:mod:`indexer.pipeline.tasks`): a transient failure within
``transient_retry_budget_s``, refused credentials without a deadline, anything else
``max_retries`` times. One given up on leaves its contacts as they were until a later batch
touches them again; it is logged, with ``sidecar contacts-rebuild`` as the repair. A task of
another deployment (:mod:`indexer.pipeline.deployment`) is put back on its queue, and dropped
with the same log once refused for ``REFUSE_WINDOW_S``: it never touches this index.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery import Task
from celery.exceptions import Ignore

from indexer.adapters.errors import classify
from indexer.core.errors import ErrorKind
from indexer.core.retry import backoff_seconds
from indexer.pipeline import context
from indexer.pipeline.celery_app import app
from indexer.pipeline.contacts_sync import Defer, Recount, keeper, recount
from indexer.pipeline.deployment import (
    DEPLOYMENT,
    REFUSE_WINDOW_S,
    REFUSED_SINCE,
    REQUEUE_DELAY_S,
    log_refusal,
    mismatch,
    stamped,
)
from indexer.settings import Settings

log = logging.getLogger(__name__)
FIRST_FAILURE = "first_failure"
TASK = "sidecar.contacts"


def defer_to(settings: Settings) -> Defer:
    """``defer`` for :func:`indexer.pipeline.contacts_sync.fulltext_sink`: each recount
    published, stamped with this deployment, due now."""

    def publish(rc: Recount) -> None:
        contacts.apply_async(args=[stamped(settings, rc.to_json())],
                             queue=settings.contacts_queue)

    return publish


def _given_up(why: str, exc: object) -> dict[str, Any]:
    log.error("contacts of a batch not recounted (%s): %s; `sidecar contacts-rebuild` "
              "repairs the summary", why, exc)
    return {"stage": "contacts", "recounted": 0, "given_up": why}


@app.task(bind=True, name=TASK, acks_late=True, reject_on_worker_lost=True, max_retries=None,
          ignore_result=True)  # nobody waits on it: no result written to Redis per batch
def contacts(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Recount one mailbox's contacts a full-text batch moved."""
    settings = context.current().settings
    refused = mismatch(settings, payload.get(DEPLOYMENT))
    if refused:
        log_refusal(refused)
        since = float(payload.get(REFUSED_SINCE) or time.time())
        if time.time() - since >= REFUSE_WINDOW_S:
            return _given_up("refused by every worker", refused)
        queue = (self.request.delivery_info or {}).get("routing_key")
        self.apply_async(args=[{**payload, REFUSED_SINCE: since}], task_id=self.request.id,
                         queue=queue, countdown=REQUEUE_DELAY_S)
        raise Ignore()
    try:
        rc = Recount.from_json(payload)
    except ValueError as exc:
        return _given_up("malformed", exc)
    try:
        return {"stage": "contacts", "recounted": recount(keeper(settings), [rc])}
    except Exception as exc:
        kind = classify(exc)
        first = float(payload.get(FIRST_FAILURE) or time.time())
        again = kind is ErrorKind.CONFIG or (
            time.time() - first < settings.transient_retry_budget_s
            if kind is ErrorKind.TRANSIENT
            else kind is not ErrorKind.POISON and self.request.retries < settings.max_retries)
        if not again:
            return _given_up(str(kind), exc)
        delay = backoff_seconds(self.request.retries, cap=settings.retry_backoff_max_s)
        log.warning("contacts recount failed (%s), retry in %.1fs: %s",
                    type(exc).__name__, delay, exc)
        raise self.retry(args=({**payload, FIRST_FAILURE: first},), exc=exc,
                         countdown=delay) from exc
