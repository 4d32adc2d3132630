"""Send the ingest core's tasks to Celery, and dead-letter what cannot be decoded.

What every reader of records (the tailer, ``ingest``, the backfills, a redrive, the API's
read-repair) hands to :class:`~indexer.pipeline.ingest.Ingestor` or calls itself: one place
that knows the queue of each stage and stamps each task with its deployment. Running the
worker processes that consume those queues is :mod:`indexer.pipeline.workers`.
"""

from __future__ import annotations

from typing import Any

from indexer.adapters import factories
from indexer.adapters.broker import lost_task_check
from indexer.core.dead_letters import trigger_of
from indexer.core.records import RawRecord
from indexer.pipeline.deployment import stamped
from indexer.pipeline.ingest import DecodeDeadLetter, Ingestor, Pending, Send
from indexer.settings import Settings


def celery_send(settings: Settings) -> Send:
    from indexer.pipeline import tasks

    def send(stage: str, payload: dict[str, Any]) -> Pending:
        task = tasks.fulltext if stage == "fulltext" else tasks.vectors
        queue = settings.fulltext_queue if stage == "fulltext" else settings.vectors_queue
        # Every task names the deployment it was planned for (see ``deployment``).
        result: Pending = task.apply_async(args=[stamped(settings, payload)], queue=queue)
        return result

    return send


class _Skipped:
    """The result of a stage another reader applies: nothing to wait for."""

    def get(self, timeout: float | None = None, propagate: bool = True) -> Any:
        return {}

    def ready(self) -> bool:
        return True


def only_stage(send: Send, stage: str) -> Send:
    """A ``send`` that enqueues only ``stage``'s tasks (a per-stage stream reader)."""

    def filtered(task_stage: str, payload: dict[str, Any]) -> Pending:
        return send(task_stage, payload) if task_stage == stage else _Skipped()

    return filtered


def decode_dead_letter(settings: Settings) -> DecodeDeadLetter:
    store = factories.dead_letters(settings)

    def write(item: RawRecord, reason: str) -> None:
        # Only the trigger: keys, event name, sequence number — never images or addresses.
        store.add(stage="decode", reason=reason, payload=trigger_of(item.raw), source=item.source)

    return write


def ingestor(settings: Settings, *, replay: bool = False) -> Ingestor:
    """The Celery ingestor of the deployment; it sends again a task the broker lost
    (``replay``: a backfill's, whose tasks read first eventually consistent)."""
    return Ingestor(celery_send(settings), decode_dead_letter(settings),
                    settings.batch_messages, lost=lost_task_check(settings), replay=replay)
