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
from indexer.core.items import ItemKind, ItemRef, classify
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

    def admit(self, raw: object) -> bool:
        named = _named(raw)
        if named is None:
            return True
        record, ref = named
        if ref.message_key is None or ref.kind is ItemKind.REFERENCE:
            return True  # nothing to sync: the ingest path counts it as ignored
        message = MessageRef(ref.mailbox_id, ref.message_key)
        person = ParticipantRef(message, record.pk, record.sk)
        if ref.kind is ItemKind.PARTICIPANT and person in self.unsynced:
            return True
        sinks = _BOTH if ref.kind in (ItemKind.MESSAGE, ItemKind.POINTER) else _FULLTEXT
        fresh = {(message, sink) for sink in sinks} - self.seen
        self.seen |= fresh
        return bool(fresh)
