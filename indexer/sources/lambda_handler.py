"""AWS Lambda entry point for a DynamoDB Streams event-source mapping with
``FunctionResponseTypes: ["ReportBatchItemFailures"]``.

``{"Records": [...]}`` in, ``{"batchItemFailures": [{"itemIdentifier": <SequenceNumber>}]}`` out.
Lambda checkpoints the shard just before the *lowest* reported sequence number and delivers
everything from there again, so a record may be left unreported only once it is applied.

Why it is shaped this way:
- Records are decoded with the core (:func:`indexer.core.records.decode_record`) and planned
  as triggers; each message is synced with the same read-write-verify code the Celery tasks run
  (:func:`indexer.pipeline.sync.sync_fulltext`), in batches of ``SIDECAR_BATCH_MESSAGES``
  messages in the order their first record appears.
- **Full text runs in the handler** (a strongly consistent read and one bulk per batch: cheap,
  no model). **Vectors are enqueued** on the vectors queue and awaited within the invocation's
  time left: loading torch and the model would make every cold start take seconds and need
  ~1.5 GB of memory, while the vectors workers (ECS/EKS) hold the model, the embedding cache and
  the Qdrant client warm. Waiting keeps the rule "a record is reported done only once both
  indexes hold it"; a vectors task that has not finished in time reports its records as failed
  (Lambda re-delivers them; a replay is harmless: it embeds nothing already embedded).
- Poison (undecodable records, items of unknown shape, an index's 4xx rejection) is
  dead-lettered with its reason and counts as done. A dead letter that cannot be written makes
  its record a failure, never a silent drop.
- The first batch that fails (engine down, throttled, any error) stops the invocation: it and
  every later batch are reported, since Lambda delivers them again anyway and an engine that is
  down would only burn the invocation's time. Errors that are not transient are retried the
  same way; the mapping's ``MaximumRetryAttempts`` and on-failure destination bound them.
- **Its logs are JSON lines** like every other process's: the runtime sets up the root logger
  (its own text or JSON format, level WARNING unless the function's log level says otherwise,
  which dropped the info summary), so the first invocation in a Lambda runtime gives the
  runtime's handlers the sidecar's formatter and the level ``SIDECAR_LOG_LEVEL``, else the
  function's ``AWS_LAMBDA_LOG_LEVEL``, else info (:func:`indexer.logs.configure_lambda`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from indexer import logs
from indexer.adapters import factories
from indexer.adapters.aws import audit as aws_audit
from indexer.core.errors import RecordError
from indexer.core.plan import MessageRef, ParticipantRef, Plan
from indexer.core.records import decode_record
from indexer.core.task_payload import TaskPayload
from indexer.pipeline.contacts_sync import fulltext_sink
from indexer.pipeline.dispatch import celery_send
from indexer.pipeline.ingest import Pending, answer_of
from indexer.pipeline.sync import Outcome, sync_fulltext
from indexer.settings import Settings, get_settings

log = logging.getLogger(__name__)
DEFAULT_BUDGET_S = 300.0  # no Lambda context (a local call): how long vectors are awaited
MARGIN_S = 5.0  # kept back from the invocation's time left, to answer before Lambda's timeout
_logging_ready = False  # the runtime's logging adopted (once per execution environment)


class LambdaContext(Protocol):
    """The part of the Lambda runtime's context object the handler uses."""

    def get_remaining_time_in_millis(self) -> int: ...


@dataclass(slots=True)
class _Record:
    sequence: str | None
    message: MessageRef | None = None
    failed: bool = False


@dataclass
class BatchResult:
    """What one invocation did; ``failures`` are the records' sequence numbers to report."""

    records: int = 0
    applied_messages: int = 0
    dead_lettered: int = 0
    failures: list[str] = field(default_factory=list)

    def response(self) -> dict[str, list[dict[str, str]]]:
        return {"batchItemFailures": [{"itemIdentifier": s} for s in self.failures]}


def handler(event: Mapping[str, Any], context: LambdaContext | None) -> dict[str, Any]:
    """The Lambda entry point (``indexer.sources.lambda_handler.handler``). Its AWS calls are
    the workers' (the CDK Lambda stack attaches ``deploy/iam/workers.json``)."""
    _adopt_runtime_logging()
    with aws_audit.declared(aws_audit.WORKERS):
        result = process(event, get_settings(), budget_s(context))
    log.info(
        "lambda batch: %d record(s), %d message(s) applied, %d dead-lettered, %d reported",
        result.records, result.applied_messages, result.dead_lettered, len(result.failures),
    )
    return result.response()


def _adopt_runtime_logging() -> None:
    """JSON lines at info under a Lambda runtime (``AWS_LAMBDA_FUNCTION_NAME`` is set there);
    a local call (a test, ``python -c``) keeps the caller's logging as it is."""
    global _logging_ready
    if not _logging_ready and os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        logs.configure_lambda(logging.INFO)
        _logging_ready = True


def budget_s(context: LambdaContext | None) -> float:
    """Seconds this invocation may still spend waiting."""
    if context is None:
        return DEFAULT_BUDGET_S
    return max(1.0, context.get_remaining_time_in_millis() / 1000.0 - MARGIN_S)


def _sequence(raw: object) -> str | None:
    ddb = raw.get("dynamodb") if isinstance(raw, Mapping) else None
    seq = ddb.get("SequenceNumber") if isinstance(ddb, Mapping) else None
    return seq if isinstance(seq, str) and seq else None


def _source(raw: object, sequence: str | None) -> str:
    arn = raw.get("eventSourceARN") if isinstance(raw, Mapping) else None
    return f"lambda:{arn if isinstance(arn, str) else '?'}#{sequence or '?'}"


class _Batch:
    """The records of one event, planned per message, and the messages' fate."""

    def __init__(self, settings: Settings, raws: Sequence[object]) -> None:
        self.settings = settings
        self.records = [_Record(_sequence(raw)) for raw in raws]
        self.order: list[MessageRef] = []
        self.people: dict[MessageRef, set[ParticipantRef]] = {}
        self.vectors: set[MessageRef] = set()
        self.failed: set[MessageRef] = set()
        self.result = BatchResult(records=len(raws))
        for raw, record in zip(raws, self.records, strict=True):
            self._plan(raw, record)

    def _plan(self, raw: object, record: _Record) -> None:
        plan = Plan()
        try:
            touched = plan.add(decode_record(raw))
        except RecordError as exc:
            record.failed = not self._dead_letter(
                stage="decode", reason=exc.reason, payload=raw,
                source=_source(raw, record.sequence),
            )
            return
        for ref in touched:
            record.message = ref
            if ref not in self.people:
                self.order.append(ref)
                self.people[ref] = set()
        self.vectors |= plan.vectors
        for person in plan.participants:
            self.people[person.message].add(person)

    def _dead_letter(self, **entry: Any) -> bool:
        try:
            factories.dead_letters(self.settings).add(**entry)
        except Exception as exc:
            log.error("dead letter not written (%s): record left to Lambda's retry", exc)
            return False
        self.result.dead_lettered += 1
        return True

    def chunks(self) -> Iterator[list[MessageRef]]:
        size = self.settings.batch_messages
        for start in range(0, len(self.order), size):
            yield self.order[start : start + size]

    def fulltext(self, chunk: list[MessageRef]) -> None:
        """Sync one chunk into OpenSearch; poison is dead-lettered, other failures raise."""
        people = [p for ref in chunk for p in sorted(self.people[ref])]
        outcome = sync_fulltext(
            factories.store(self.settings), fulltext_sink(self.settings), chunk, people
        )
        self._dead_letter_outcome("fulltext", outcome)

    def _dead_letter_outcome(self, stage: str, outcome: Outcome) -> None:
        for ref, reason in outcome.poison.items():
            payload = TaskPayload.of([ref], sorted(self.people.get(ref, ()))).to_json()
            if not self._dead_letter(
                stage=stage, reason=reason, payload=payload, mailbox_id=ref.mailbox_id
            ):
                self.failed.add(ref)

    def report(self) -> BatchResult:
        """Every record not applied: its own decode failure, or its message's."""
        for record in self.records:
            if record.failed or (record.message is not None and record.message in self.failed):
                if record.sequence is None:
                    raise RuntimeError("a record that was not applied has no SequenceNumber")
                self.result.failures.append(record.sequence)
        self.result.applied_messages = len(set(self.order) - self.failed)
        return self.result


def process(event: Mapping[str, Any], settings: Settings, budget: float) -> BatchResult:
    """Apply one event's records; the result names those Lambda must deliver again."""
    raws = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(raws, list):
        raise ValueError("a DynamoDB Streams event is an object with a 'Records' list")
    deadline = time.monotonic() + budget
    batch = _Batch(settings, raws)
    waiting: list[tuple[list[MessageRef], Pending]] = []
    chunks = list(batch.chunks())
    for n, chunk in enumerate(chunks):
        try:
            batch.fulltext(chunk)
            vectors = [r for r in chunk if r in batch.vectors]
            if vectors:
                payload = TaskPayload.of(vectors).to_json()
                waiting.append((vectors, celery_send(settings)("vectors", payload)))
        except Exception as exc:
            rest = [ref for later in chunks[n:] for ref in later]
            log.warning("batch of %d message(s) failed (%s): %s; %d message(s) reported",
                        len(chunk), type(exc).__name__, exc, len(rest))
            batch.failed.update(rest)
            break
    for refs, pending in waiting:
        _await_vectors(batch, refs, pending, deadline)
    return batch.report()


def _await_vectors(
    batch: _Batch, refs: list[MessageRef], pending: Pending, deadline: float
) -> None:
    """A vectors task's messages are done once it finished (its poison it dead-letters)."""
    try:
        answer_of(pending, deadline)
    except Exception as exc:
        log.warning("vectors of %d message(s) not applied in time (%s)", len(refs), exc)
        batch.failed.update(refs)
