"""Plan index work from decoded stream records ("records as triggers").

A record never carries the data that is written to an index: it only names the message (and,
for participant items, the participant item) whose state must be brought in line with the
table. The worker re-reads the table with strongly consistent reads and writes the whole
projection — or deletes it when the message is gone — then reads the table again and repeats if
it changed meanwhile (see :mod:`indexer.pipeline.sync`). This makes the result independent of
record order, duplication and the number of concurrent workers (design invariants 1 and 2).

Planner rules:
- Message, pointer (META): both sinks (existence, subject, forai, metadata).
- Body: full-text only (``clean``); the vector comes from the Message item's ``forai``.
- Participant: sync the participant into the sidecar's participant store, then full-text.
- Thread summary, reference: nothing is indexed from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

from indexer.core.items import ItemKind, classify
from indexer.core.records import StreamRecord

# Off while the vectors sink reads (``indexer.pipeline.sync.sync_vectors``): a point is made
# from the Message item alone, and the Body (up to 400 KB, 4 KB per read unit) was read for
# nothing. A context variable, not a parameter, so every ``read_states`` (a test's stalling
# subclass included) keeps its signature; it is local to the thread running the sync.
BODY_WANTED: ContextVar[bool] = ContextVar("body_wanted", default=True)
# Set by a sync's verify read: each message's (thread_key, ts) as its previous read found
# them. META never changes while its message exists, so the Message is read at that key
# without META; a Message missing there is read again the full way (deleted, or stored
# again under another key).
KNOWN_KEYS: ContextVar[Mapping[MessageRef, tuple[str, int]] | None] = ContextVar(
    "known_keys", default=None)
# Off for a replay's first read of the mail table's items (Message, Body, META): eventually
# consistent, half the read units. Safe because every write of a sink is followed by a
# strongly consistent verify read that repeats the round if the table differs
# (``indexer.pipeline.sync``); worth it for a backfill, whose items were mostly written long
# before, so the eventual read is almost never stale. The live path keeps it on: its records
# follow their writes by a moment, when a stale read would cost a second round.
MAIL_READ_CONSISTENT: ContextVar[bool] = ContextVar("mail_read_consistent", default=True)


@dataclass(frozen=True, slots=True, order=True)
class MessageRef:
    """Identity of one indexed message: the same message in two mailboxes is two refs."""

    mailbox_id: str
    message_key: str

    def to_json(self) -> list[str]:
        return [self.mailbox_id, self.message_key]

    @classmethod
    def from_json(cls, raw: object) -> MessageRef:
        if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, str) for x in raw)):
            raise ValueError("a message ref is [mailbox_id, message_key]")
        return cls(raw[0], raw[1])


@dataclass(frozen=True, slots=True, order=True)
class ParticipantRef:
    """A participant item's key, with the message it belongs to."""

    message: MessageRef
    pk: str
    sk: str

    def to_json(self) -> list[str]:
        return [self.message.mailbox_id, self.message.message_key, self.pk, self.sk]

    @classmethod
    def from_json(cls, raw: object) -> ParticipantRef:
        if not (isinstance(raw, list) and len(raw) == 4 and all(isinstance(x, str) for x in raw)):
            raise ValueError("a participant ref is [mailbox_id, message_key, pk, sk]")
        return cls(MessageRef(raw[0], raw[1]), raw[2], raw[3])


@dataclass(slots=True)
class Plan:
    """What a set of records requires of each sink (sets: duplicates collapse)."""

    fulltext: set[MessageRef] = field(default_factory=set)
    vectors: set[MessageRef] = field(default_factory=set)
    participants: set[ParticipantRef] = field(default_factory=set)
    ignored: int = 0

    def add(self, record: StreamRecord) -> set[MessageRef]:
        """Fold one record into the plan; returns the messages it touches (may be empty).

        Raises :class:`~indexer.core.errors.RecordError` for an item of unknown shape.
        """
        ref = classify(record.pk, record.sk)
        if ref.message_key is None or ref.kind is ItemKind.REFERENCE:
            self.ignored += 1
            return set()
        message = MessageRef(ref.mailbox_id, ref.message_key)
        self.fulltext.add(message)
        if ref.kind in (ItemKind.MESSAGE, ItemKind.POINTER):
            self.vectors.add(message)
        if ref.kind is ItemKind.PARTICIPANT:
            self.participants.add(ParticipantRef(message, record.pk, record.sk))
        return {message}


def message_of(record: StreamRecord) -> MessageRef | None:
    """The message whose indexing a record triggers, or None (thread summaries, references).

    Raises :class:`~indexer.core.errors.RecordError` for an item of unknown shape.
    """
    ref = classify(record.pk, record.sk)
    if ref.message_key is None or ref.kind is ItemKind.REFERENCE:
        return None
    return MessageRef(ref.mailbox_id, ref.message_key)


def plan_records(records: Iterable[StreamRecord]) -> Plan:
    """A plan for records known to be well-formed."""
    plan = Plan()
    for record in records:
        plan.add(record)
    return plan
