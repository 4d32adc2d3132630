"""Replaying an export: each message synced once per index per run, participants first.

Why: an export row is a trigger, and a message has ~20 rows (Message, Body, pointer,
participants, references, thread items) spread over the export's files, so a plain replay
re-reads each message about once per batch that names one of its rows. An export backfill
therefore runs in two passes. The first brings the participant store in line with every
participant row. The second syncs each message once per index: when it runs, every participant
the export names is already in the store, so one full-text sync builds the complete document,
and a later row of the same message would only re-read the same table state. Changes made while
the backfill runs arrive through the live stream, whose records are never filtered.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from indexer.core.errors import RecordError
from indexer.core.items import ItemKind, ItemRef, classify, message_pk
from indexer.core.plan import MessageRef, ParticipantRef
from indexer.core.records import StreamRecord, decode_record

_BOTH = frozenset({"fulltext", "vectors"})
_FULLTEXT = frozenset({"fulltext"})


def _named(raw: object) -> tuple[StreamRecord, ItemRef] | None:
    """The record and the item it names, or None when it cannot be decoded or classified."""
    try:
        record = decode_record(raw)
        return record, classify(record.pk, record.sk)
    except RecordError:
        return None


def participant_ref(raw: object) -> ParticipantRef | None:
    """The participant item a raw record names, or None (another kind, or undecodable)."""
    named = _named(raw)
    if named is None:
        return None
    record, ref = named
    if ref.kind is not ItemKind.PARTICIPANT or ref.message_key is None:
        return None
    return ParticipantRef(MessageRef(ref.mailbox_id, ref.message_key), record.pk, record.sk)


@dataclass
class ReplayFilter:
    """Second pass: admits a row only if it names a (message, index) not yet synced in this
    run. Rows it cannot classify are admitted, so the ingest path dead-letters them with their
    reason; ``unsynced`` participants (the first pass failed them) are always admitted, so they
    are synced the ordinary way, participant first."""

    unsynced: set[ParticipantRef] = field(default_factory=set)
    seen: set[tuple[MessageRef, str]] = field(default_factory=set)

    def _named_message(self, raw: object) -> tuple[MessageRef, ItemKind, bool] | None:
        """(message, item kind, an unsynced participant?) of a row naming a message; None
        for any other row (undecodable, a thread or reference item): it passes as it is."""
        named = _named(raw)
        if named is None:
            return None
        record, ref = named
        if ref.message_key is None or ref.kind is ItemKind.REFERENCE:
            return None  # nothing to sync: the ingest path counts it as ignored
        message = MessageRef(ref.mailbox_id, ref.message_key)
        person = ParticipantRef(message, record.pk, record.sk)
        return message, ref.kind, ref.kind is ItemKind.PARTICIPANT and person in self.unsynced

    def admit(self, raw: object) -> bool:
        """Whether the row names a (message, index) not yet synced (rows kept as they are:
        a Body then a META row of one message are both admitted; :meth:`trigger` is what
        the backfill uses)."""
        found = self._named_message(raw)
        if found is None or found[2]:
            return True
        message, kind, _ = found
        sinks = _BOTH if kind in (ItemKind.MESSAGE, ItemKind.POINTER) else _FULLTEXT
        fresh = {(message, sink) for sink in sinks} - self.seen
        self.seen |= fresh
        return bool(fresh)

    def trigger(self, raw: object) -> object | None:
        """The record to feed for this row, or None (its message is synced in this run).

        The first row of a message becomes a trigger naming the message's META item, which
        plans both indexes at once. Why: a message's Body row sorts before its META row in an
        export, and admitting the Body for full text and then META for vectors synced its
        full text twice (META plans both). Unsynced participants pass as they are.
        """
        found = self._named_message(raw)
        if found is None:
            return raw
        message, _, unsynced = found
        if unsynced:
            self.seen.add((message, "fulltext"))
            return raw
        fresh = {(message, sink) for sink in _BOTH} - self.seen
        if not fresh:
            return None
        self.seen |= fresh
        return meta_trigger(message)


def meta_trigger(message: MessageRef) -> dict[str, object]:
    """A trigger record naming a message's META item (it plans both indexes)."""
    pk = message_pk(message.mailbox_id, message.message_key)
    return {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": pk}, "SK": {"S": "META"}}}}
