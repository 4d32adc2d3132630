"""The participants-first pass of a backfill (export or Scan), in this process.

Why a pass of its own: a message's full-text document names its participants, which the
participant store (one PEOPLE item per message in the sidecar's table) must hold before the
message is synced; a message synced before one of its participant rows is read would have to
be synced again. So a backfill first brings the participant store in line with every
participant row, then syncs each message once per index (:mod:`indexer.core.replay`).

Why buffered: a message's participant items are keyed by address, so they lie in several
data files (or Scan pages). Synced file by file, its PEOPLE item was written once per file
holding one of them (2.9 times per message on the export path, issue 28), and a write is
billed on the whole item. The pass gathers refs over files and pages, up to ``limit`` of
them, and syncs them sorted by message, in chunks cut at message boundaries: each PEOPLE item
is written once per buffer. A unit's mark (file or page done) is put only after the buffer
holding its refs was synced without failure, so a restart redoes at most the unsynced units.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from typing import Protocol

from indexer.core.errors import TransientError
from indexer.core.plan import ParticipantRef
from indexer.core.records import RawRecord
from indexer.core.replay import participant_ref

PEOPLE_ATTEMPTS = 5
# ~300 bytes a ref: a buffer of 50,000 holds ~15 MB, the participants of ~6,000 messages of
# list mail (7.7 per message) or ~1,800 of the corpus (28.4).
PEOPLE_BUFFER = 50_000
log = logging.getLogger(__name__)


class ParticipantSync(Protocol):
    """:meth:`indexer.adapters.dynamodb.store.DynamoStore.sync_participants`."""

    def sync_participants(self, refs: list[ParticipantRef]) -> None: ...


def participant_refs(rows: Iterable[RawRecord]) -> set[ParticipantRef]:
    """The participant items these rows name (other rows, and undecodable ones, name none)."""
    return {ref for row in rows if row.error is None
            if (ref := participant_ref(row.raw)) is not None}


def message_chunks(refs: set[ParticipantRef], messages: int) -> Iterator[list[ParticipantRef]]:
    """``refs`` sorted, in chunks of at most ``messages`` messages: never a message split."""
    chunk: list[ParticipantRef] = []
    count = 0
    for _, group in groupby(sorted(refs), key=lambda ref: ref.message):
        if count == messages:
            yield chunk
            chunk, count = [], 0
        chunk.extend(group)
        count += 1
    if chunk:
        yield chunk


class PeoplePass:
    """Participant refs gathered over units and synced together (see the module)."""

    def __init__(self, store: ParticipantSync, batch_messages: int,
                 limit: int = PEOPLE_BUFFER) -> None:
        self._store, self._batch, self._limit = store, max(1, batch_messages), limit
        self._refs: set[ParticipantRef] = set()
        self._marks: list[Callable[[], None]] = []
        self.unsynced: set[ParticipantRef] = set()  # for the message pass to send as they are
        self.synced = 0

    def add(self, rows: Iterable[RawRecord], mark: Callable[[], None]) -> None:
        """One unit's rows; ``mark`` runs once its refs are synced."""
        self._refs |= participant_refs(rows)
        self._marks.append(mark)
        if len(self._refs) >= self._limit:
            self.flush()

    def flush(self) -> None:
        refs, marks = self._refs, self._marks
        self._refs, self._marks = set(), []
        failed: set[ParticipantRef] = set()
        for chunk in message_chunks(refs, self._batch):
            if not self._sync(chunk):
                failed |= set(chunk)
        self.synced += len(refs) - len(failed)
        self.unsynced |= failed
        if not failed:
            for mark in marks:
                mark()

    def _sync(self, chunk: list[ParticipantRef]) -> bool:
        for attempt in range(PEOPLE_ATTEMPTS):
            try:
                self._store.sync_participants(chunk)
                return True
            except TransientError as exc:
                log.warning("participant pass: %s (attempt %d)", exc, attempt + 1)
                time.sleep(min(30.0, 0.5 * 2**attempt))
            except Exception as exc:
                log.warning("participant pass: %s; left to the message pass", exc)
                return False
        return False
