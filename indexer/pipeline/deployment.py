"""Tasks carry the deployment they were planned for; a worker of another one refuses them.

A task names messages, and a worker reads *its own* table to sync them: given a task of
another deployment (two deployments on one Redis with the same queue prefix, a staging
worker pointed at production's broker) it would find the messages absent and delete them
from its indexes — and the task's own deployment would never see its work done. So every
task carries ``{"table", "index", "collection"}``; a worker configured for anything else
puts the task back on its queue (same task id, so whoever waits on it still gets the real
result) and logs an error at most once a minute. A task refused for longer than
``REFUSE_WINDOW_S`` (no worker of its deployment is running) is dead-lettered with a reason
naming both deployments. It never touches an index.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from indexer.settings import Settings

log = logging.getLogger(__name__)
DEPLOYMENT = "deployment"  # payload key
REFUSED_SINCE = "refused_since"  # payload key: when a worker first refused this task
REFUSE_WINDOW_S = 3600.0
REQUEUE_DELAY_S = 1.0
LOG_EVERY_S = 60.0
_last_logged: dict[str, float] = {}


def deployment(settings: Settings) -> dict[str, str]:
    """What a task is planned for: the mail table and the index and collection aliases."""
    return {
        "table": settings.table,
        "index": settings.opensearch_index,
        "collection": settings.qdrant_collection,
    }


def stamped(settings: Settings, payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, DEPLOYMENT: deployment(settings)}


def mismatch(settings: Settings, planned: Any) -> str | None:
    """None when this worker may run a task stamped ``planned`` (its payload's deployment);
    else a reason naming both deployments. A task without a deployment (``None``: sent by a
    version before it was added) is accepted."""
    own = deployment(settings)
    if planned is None or planned == own:
        return None
    return f"task planned for {_describe(planned)}, refused by a worker of {_describe(own)}"


def _describe(value: Any) -> str:
    if not isinstance(value, dict):
        return f"an unknown deployment ({str(value)[:80]!r})"
    return ", ".join(f"{k} {str(value.get(k))[:80]!r}" for k in ("table", "index", "collection"))


def log_refusal(reason: str) -> None:
    """An error at most once a minute per reason (a busy queue refuses many tasks)."""
    now = time.monotonic()
    if now - _last_logged.get(reason, -LOG_EVERY_S) >= LOG_EVERY_S:
        _last_logged[reason] = now
        log.error("refusing tasks of another deployment: %s", reason)
