"""``sidecar purge --mailbox M``: remove a mailbox from both indexes and every sidecar store.

What names a mailbox on the sidecar's side, and is removed:
- OpenSearch: its documents in every index of the family (delete-by-query, refreshed; on
  Serverless search + bulk delete, :mod:`indexer.adapters.opensearch.serverless`), and its
  contacts in the contact summary (:mod:`indexer.pipeline.contacts_sync`);
- Qdrant: its points (filter delete) and the cached vectors of ``forai`` texts no other
  mailbox's point still uses (a vector is derived from the mail's text, even though a cache
  entry is keyed by content hash only);
- the sidecar's table: its participant items ``P#<mailbox>#...`` (checkpoints, the lease and
  backfill marks are per stream, table or export, never per mailbox);
- Redis: its dead letters and stored task results naming its messages.

The mail table is not ours and is left alone. Each step deletes what is there now, so running
purge again is a no-op that reports zeros. If the table still holds the mailbox, a later stream
record (or ``reconcile --repair``) indexes those messages again: the report says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from indexer.adapters import factories
from indexer.adapters.dynamodb.dlq import remove_task_results
from indexer.adapters.opensearch.contacts import ContactsIndex
from indexer.ops.engines import open_engines
from indexer.settings import Settings

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What was removed, by store; ``table_still_has_messages`` warns that it will come back."""

    mailbox_id: str
    fulltext_docs: int
    vector_points: int
    cached_vectors: int
    participants: int
    dead_letters: int
    task_results: int
    table_still_has_messages: bool
    contacts: int = 0
    # wall-clock seconds of each step: a purge of a large mailbox runs beside everyone's
    # searches, and an operator sizing its window wants to know which store took the time
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def removed(self) -> int:
        return (
            self.fulltext_docs
            + self.vector_points
            + self.cached_vectors
            + self.participants
            + self.dead_letters
            + self.task_results
            + self.contacts
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"removed": self.removed}


def _step(seconds: dict[str, float], name: str, run: Callable[[], T]) -> T:
    began = time.perf_counter()
    try:
        return run()
    finally:
        seconds[name] = round(time.perf_counter() - began, 3)


def purge(settings: Settings, mailbox: str, rate: float | None = None) -> PurgeReport:
    """Remove ``mailbox`` from both indexes and the sidecar's stores (idempotent). The
    engines' deletes are paced at ``rate`` per second (default ``SIDECAR_PURGE_RATE``)."""
    if not mailbox or "#" in mailbox:
        raise ValueError("a mailbox id is non-empty and never contains '#'")
    pace = settings.purge_rate if rate is None else rate
    if pace < 0:
        raise ValueError("the purge rate is a number of documents per second, 0 or more")
    took: dict[str, float] = {}
    began = time.perf_counter()
    with open_engines(settings) as engines:
        # both tables answer before anything is deleted: a misconfiguration refuses (naming
        # the missing table) instead of stopping halfway through the stores
        engines.store.describe()
        took["open"] = round(time.perf_counter() - began, 3)
        docs = _step(took, "opensearch",
                     lambda: engines.fulltext.delete_mailbox(mailbox, pace))
        contacts = 0 if engines.fulltext.serverless else _step(
            took, "contacts", lambda: ContactsIndex(engines.fulltext).delete_mailbox(mailbox))
        points, cached = _step(took, "qdrant",
                               lambda: engines.vectors.delete_mailbox(mailbox, pace))
        participants = _step(took, "participants",
                             lambda: engines.store.delete_participants_of_mailbox(mailbox))
        left = _step(took, "check", lambda: any(engines.store.mailbox_pages(mailbox, limit=1)))
    dead = _step(took, "dead_letters",
                 lambda: factories.dead_letters(settings).remove_mailbox(mailbox))
    results = _step(took, "task_results",
                    lambda: remove_task_results(factories.redis_client(settings), mailbox))
    return PurgeReport(mailbox, docs, points, cached, participants, dead, results, left,
                       contacts, took)
