"""Feed stream records through the Celery path in batches, and optionally wait for them.

Decoding and planning are pure and cheap, so they run here; a record that cannot be decoded
is dead-lettered at once with its reason and source, and the rest go on. Each batch becomes
one full-text task and (when needed) one vectors task on separate queues, so full-text
freshness never waits for embedding.

A task can vanish from the broker: kombu's Redis transport pops a task and records it as
unacked in two steps, and a worker SIGKILLed between them takes the task with it. While waiting,
every ``LOST_CHECK_S`` without an answer the tasks not yet answered are looked for (``Lost``);
one that is neither queued nor in flight and never started, at two looks in a row, is sent
again (tasks are idempotent: a duplicate costs time, never correctness).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from celery.exceptions import TimeoutError as CeleryTimeoutError

from indexer.core.errors import RecordError
from indexer.core.plan import MessageRef, Plan, message_of
from indexer.core.records import RawRecord, StreamRecord, decode_record
from indexer.core.task_payload import TaskPayload
from indexer.metrics import RECORDS_APPLIED, RECORDS_DEAD_LETTERED, RECORDS_READ, TASKS_RESENT


class Pending(Protocol):
    def get(self, timeout: float | None = None, propagate: bool = True) -> Any: ...
    def ready(self) -> bool: ...


Send = Callable[[str, dict[str, Any]], Pending]
# Writes an undecodable record to the dead-letter store with its reason (not the entry
# itself: that is :class:`indexer.adapters.dynamodb.dlq.DeadLetter`).
DecodeDeadLetter = Callable[[RawRecord, str], None]
# For each task: True when the broker has no trace of it (not queued, not in flight) and it
# never started.
Lost = Callable[[Sequence[Pending]], list[bool]]

log = logging.getLogger(__name__)


@dataclass
class Tally:
    """The one set of counters every feeding run reports (ingest, backfill, scan, export),
    added up part by part."""

    read: int = 0
    applied: int = 0
    dead_lettered: int = 0
    ignored: int = 0
    batches: int = 0
    embedded: int = 0

    def add(self, part: Tally) -> None:
        for name in ("read", "applied", "dead_lettered", "ignored", "batches", "embedded"):
            setattr(self, name, getattr(self, name) + getattr(part, name))


@dataclass
class IngestSummary(Tally):
    """One ingestor's run: the tally, and what only feeding records knows."""

    decode_failed: int = 0
    waited: bool = False
    resent: int = 0  # tasks sent again because the broker had lost them
    # Worker-timed seconds of the batches, by stage, and of those the embedder's share.
    stage_s: dict[str, float] = field(default_factory=dict)
    embed_s: float = 0.0


@dataclass
class _Task:
    stage: str
    payload: dict[str, Any]
    pending: Pending
    missing: bool = False  # not found by the last look for lost tasks
    answered: bool = False
    result: Any = None


@dataclass
class _Batch:
    records: Counter[MessageRef] = field(default_factory=Counter)
    results: list[_Task] = field(default_factory=list)
    counted: bool = False


POLL_S = 5.0
LOST_CHECK_S = 30.0


def answer_of(
    pending: Pending, deadline: float, between: Callable[[], Pending] | None = None
) -> Any:
    """A task's result, asked for in slices of ``POLL_S`` until ``deadline``.

    Each ask reads the stored result before listening for its notice; a notice published
    while the broker connection was down (a Redis restart) is never delivered, so one long
    ``get`` would wait out the whole timeout although the task is done. ``between`` runs after
    each slice without an answer and gives the task to wait for from then on (the ingestor's
    lost-task check may have sent it again).
    """
    while True:
        left = deadline - time.monotonic()
        try:
            return pending.get(timeout=max(0.1, min(POLL_S, left)), propagate=True)
        except CeleryTimeoutError:
            if left <= POLL_S:
                raise
        if between is not None:
            pending = between()


Decoded = StreamRecord | RecordError  # a record decoded once, or why it cannot be


def _decoded(item: RawRecord) -> Decoded:
    if item.error is not None:
        return item.error
    try:
        return decode_record(item.raw)
    except RecordError as exc:
        return exc


def _message_order(pair: tuple[RawRecord, Decoded]) -> tuple[int, str, str]:
    """Sort key grouping a sweep's records by message; records naming none (and undecodable
    ones, dead-lettered when fed) keep their place after them."""
    record = pair[1]
    if not isinstance(record, RecordError):
        try:
            message = message_of(record)
        except RecordError:
            message = None
        if message is not None:
            return 0, message.mailbox_id, message.message_key
    return 1, "", ""


class Ingestor:
    """Accumulates records into batches of at most ``batch_messages`` messages."""

    def __init__(
        self,
        send: Send,
        dead_letter: DecodeDeadLetter,
        batch_messages: int,
        lost: Lost | None = None,
        lost_check_s: float = LOST_CHECK_S,
        *,
        replay: bool = False,
    ) -> None:
        self._send, self._replay = send, replay
        self._lost, self._lost_check_s = lost, lost_check_s
        self._checked = time.monotonic()
        self._dead_letter = dead_letter
        self._limit = batch_messages
        self._plan = Plan()
        self._batch = _Batch()
        self._sent: list[_Batch] = []
        self.summary = IngestSummary()

    def feed(self, item: RawRecord) -> None:
        """Fold one record into the open batch.

        The batch is sent when a record names a message beyond the batch's
        ``batch_messages``, not as soon as it holds that many: a message's later records
        (Body, participants) then join the batch its first record opened, so a batch
        boundary never syncs one message twice.
        """
        self._take(item, _decoded(item))

    def _take(self, item: RawRecord, record: Decoded) -> None:
        self.summary.read += 1
        RECORDS_READ.inc()
        try:
            if isinstance(record, RecordError):
                raise record
            message = message_of(record)
        except RecordError as exc:
            self.summary.decode_failed += 1
            self.summary.dead_lettered += 1
            RECORDS_DEAD_LETTERED.inc()
            self._dead_letter(item, exc.reason)
            return
        if (message is not None and message not in self._plan.fulltext
                and len(self._plan.fulltext) >= self._limit):
            self.flush()
        touched = self._plan.add(record)
        if not touched:
            self.summary.ignored += 1
        for ref in touched:
            self._batch.records[ref] += 1

    def feed_together(self, items: Iterable[RawRecord]) -> None:
        """Feed records that arrive together (one sweep of a stream's shards) grouped by the
        message they name, then send the last batch.

        Why: a message's items sit under several partition keys, so its records reach several
        shards; fed shard after shard, they would fall into different batches and the message
        would be synced (and its PEOPLE item written) once per batch. The order within one
        message is kept, and records are triggers, so the order across messages is free.
        """
        # Each record decoded once: the sort and the feed share it (images can be 400 KB).
        for item, record in sorted(((i, _decoded(i)) for i in items), key=_message_order):
            self._take(item, record)
        self.flush()

    def feed_all(
        self, items: Iterable[RawRecord], progress: Callable[[int], None] | None = None
    ) -> None:
        for item in items:
            self.feed(item)
            if progress is not None:
                progress(1)
        self.flush()

    def flush(self) -> None:
        plan, batch = self._plan, self._batch
        if not plan.fulltext:
            return
        payload = TaskPayload.of(sorted(plan.fulltext), sorted(plan.participants),
                                 replay=self._replay)
        self._enqueue(batch, "fulltext", payload.to_json())
        if plan.vectors:
            vectors = TaskPayload.of(sorted(plan.vectors), replay=self._replay)
            self._enqueue(batch, "vectors", vectors.to_json())
        self._sent.append(batch)
        self.summary.batches += 1
        self._plan, self._batch = Plan(), _Batch()

    def _enqueue(self, batch: _Batch, stage: str, payload: dict[str, Any]) -> None:
        batch.results.append(_Task(stage, payload, self._send(stage, payload)))

    def _answer(self, task: _Task, deadline: float, later: list[_Task]) -> Any:
        """``task``'s result; while it is awaited, ``task`` and ``later`` are looked for."""

        def between() -> Pending:
            self._resend_lost([task, *later])
            return task.pending

        return answer_of(task.pending, deadline, between)

    def _resend_lost(self, tasks: list[_Task]) -> None:
        """Look for the unanswered tasks at most every ``lost_check_s``; send again the ones
        missing at two looks in a row."""
        now = time.monotonic()
        if self._lost is None or now - self._checked < self._lost_check_s:
            return
        self._checked = now
        for task, lost in zip(tasks, self._lost([t.pending for t in tasks]), strict=True):
            # Missing at two looks in a row: a task in a worker's hands between kombu's pop and
            # its unacked write is missing at one instant, never for a whole interval.
            resend = lost and task.missing
            task.missing = lost and not resend
            if resend:
                log.warning("a %s task was lost by the broker (neither queued nor in flight, "
                            "never started): sent again", task.stage)
                task.pending = self._send(task.stage, task.payload)
                self.summary.resent += 1
                TASKS_RESENT.labels(task.stage).inc()

    def _add_times(self, result: dict[str, Any]) -> None:
        stage = str(result.get("stage", "?"))
        times = self.summary.stage_s
        times[stage] = times.get(stage, 0.0) + float(result.get("seconds", 0.0))
        self.summary.embed_s += float(result.get("embed_s", 0.0))

    def wait(self, timeout_s: float = 3600.0) -> IngestSummary:
        """Block until every batch is applied (or dead-lettered) in both indexes; a second
        call waits only for what the first did not see answered."""
        deadline = time.monotonic() + timeout_s
        tasks = [task for batch in self._sent for task in batch.results if not task.answered]
        for done, task in enumerate(tasks, start=1):
            task.result = self._answer(task, deadline, tasks[done:])
            task.answered = True
        for batch in self._sent:
            if not batch.counted and all(task.answered for task in batch.results):
                self._count(batch)
        self.summary.waited = True
        return self.summary

    def batches(self) -> int:
        """Batches sent so far (each one task per stage it needs)."""
        return len(self._sent)

    def done(self) -> bool:
        """Whether every task has answered, without waiting (the broker's result store); a
        task still unanswered is looked for among the lost ones, as :meth:`wait` does."""
        open_tasks = [task for batch in self._sent for task in batch.results
                      if not (task.answered or task.pending.ready())]
        if open_tasks:
            self._resend_lost(open_tasks)
        return not open_tasks

    def _count(self, batch: _Batch) -> None:
        failed: set[MessageRef] = set()
        for task in batch.results:
            failed |= {MessageRef.from_json(r) for r in task.result.get("dead_lettered", [])}
            self.summary.embedded += int(task.result.get("embedded", 0))
            self._add_times(task.result)
        dead = sum(n for ref, n in batch.records.items() if ref in failed)
        applied = sum(batch.records.values()) - dead
        self.summary.dead_lettered += dead
        self.summary.applied += applied
        RECORDS_DEAD_LETTERED.inc(dead)
        RECORDS_APPLIED.inc(applied)
        batch.counted = True
