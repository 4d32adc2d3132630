"""Where a task's time goes: the calls a sync task makes to the table and the engines, timed
in the worker for each task and reported with the task's ``end`` event; and in the tailer,
each stream call (``get_records`` with the messages its records name, ``describe_stream``)
as an event of its own.

:func:`install` wraps a few methods of the adapters (class attributes, so a prefork child
inherits them) with a timer that adds each call's seconds to the running task's list for
that phase; :func:`take` hands the lists over at the task's end and starts the next task's.
Only timing is added around each call: arguments, results and errors pass through unchanged.

A phase called more than once in a task (the table read, then the verify reads) keeps one
figure per call, in order, so the report can tell the first read from the verify. Phases may
overlap: the participant store's read runs beside the first table read and its write beside
the first bulk (:func:`indexer.pipeline.sync.sync_fulltext`), so their figures do not add up to
the task's.

``without_contacts`` is an ablation for measurements only, never a configuration: the
full-text task writes the message index alone (the sink without the contact summary), to
show what keeping the summary costs the path.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable
from typing import Any, Protocol

PHASES: dict[str, tuple[str, str, str]] = {
    # phase: (module, class, method)
    "table read": ("indexer.adapters.dynamodb.store", "DynamoStore", "read_states"),
    # the participant store's sync, read beside the table read and written beside the bulk
    "participants: read": ("indexer.adapters.dynamodb.store", "DynamoStore",
                           "stage_participants"),
    "participants: write": ("indexer.adapters.dynamodb.participants", "StagedParticipants",
                            "commit"),
    "index before": ("indexer.adapters.opensearch.reads", "IndexReads", "sources"),
    "bulk": ("indexer.adapters.opensearch.writes", "IndexWrites", "apply"),
    "contacts: wait visible": ("indexer.adapters.opensearch.contacts", "ContactsIndex",
                               "wait_visible"),
    "contacts: recount + write": ("indexer.pipeline.contacts_sync", "ContactsKeeper",
                                  "refresh"),
}

_current: dict[str, list[float]] = {}


def _timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            _current.setdefault(name, []).append(round(time.perf_counter() - began, 6))

    return timed


def install(*, without_contacts: bool = False) -> None:
    """Wrap every phase's method (idempotent per process: call once, before the fork)."""
    for name, (module, cls, method) in PHASES.items():
        owner = getattr(importlib.import_module(module), cls)
        setattr(owner, method, _timed(name, getattr(owner, method)))
    if without_contacts:
        from indexer.adapters import factories
        from indexer.pipeline import tasks

        def messages_only(settings: Any, defer: Any = None) -> Any:
            return factories.fulltext_index(settings)

        setattr(tasks, "fulltext_sink", messages_only)  # noqa: B010 (an ablation)


class Writes(Protocol):
    def write(self, event: str, task_id: str, stage: str, refs: list[list[str]],
              **extra: Any) -> None: ...


def messages_of(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The messages a page's records name (decoded as the ingestor decodes them)."""
    from indexer.adapters.aws.streams import portable
    from indexer.core.errors import RecordError
    from indexer.core.plan import message_of
    from indexer.core.records import decode_record

    found: dict[tuple[str, str], None] = {}
    for record in records:
        try:
            ref = message_of(decode_record(portable(record)))
        except RecordError:
            continue
        if ref is not None:
            found[(ref.mailbox_id, ref.message_key)] = None
    return list(found)


def install_tailer(rec: Writes) -> None:
    """Record every stream call of the tailer: ``read`` (a page: when the call began, the
    messages its records name) and ``describe`` (a shard listing)."""
    from indexer.adapters.aws.streams import StreamReader

    records, shards = StreamReader.records, StreamReader.shards

    def timed_records(self: StreamReader, iterator: str, limit: int) -> Any:
        began = time.time()
        page = records(self, iterator, limit)
        rec.write("read", "", "tailer", [list(r) for r in messages_of(page[0])],
                  began=began, n=len(page[0]))
        return page

    def timed_shards(self: StreamReader, arn: str) -> Any:
        began = time.time()
        listed = shards(self, arn)
        rec.write("describe", "", "tailer", [], began=began, n=len(listed))
        return listed

    StreamReader.records = timed_records  # type: ignore[method-assign]
    StreamReader.shards = timed_shards  # type: ignore[method-assign]


def take() -> dict[str, list[float]]:
    """The phases timed since the last call (the task that just ended), and a fresh start."""
    found = dict(_current)
    _current.clear()
    return found
