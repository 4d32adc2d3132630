"""What a dead letter keeps of a record: only what redrive needs (pure).

Stream records are triggers — the worker re-reads the table — so a redrive needs the item's
keys, the event name and the sequence number, never the images (bodies, subjects, bcc
participant items). A participant item's key holds an address (``M#<M>#A#<email>``), so a
participant record is kept as its *message's* pointer key instead: redriving it re-reads and
re-indexes that message; the participant row itself is restored by the next record for it
or by ``sidecar backfill`` (documented in the README's dead-letter section).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from indexer.core.errors import RecordError
from indexer.core.items import ItemKind, classify, message_pk
from indexer.core.records import EventName

_EVENTS = frozenset(e.value for e in EventName)
MAX_KEY_CHARS = 2048


def _record(raw: object) -> Mapping[str, Any] | None:
    """The stream record itself (a Kinesis-wrapped one decoded), or None."""
    if not isinstance(raw, Mapping):
        return None
    kinesis = raw.get("kinesis")
    if "dynamodb" not in raw and isinstance(kinesis, Mapping):
        try:
            inner = json.loads(base64.b64decode(str(kinesis.get("data")), validate=True))
        except (binascii.Error, ValueError):
            return None
        return inner if isinstance(inner, Mapping) else None
    return raw


def _string(value: object) -> str | None:
    inner = value.get("S") if isinstance(value, Mapping) else None
    return inner if isinstance(inner, str) and len(inner) <= MAX_KEY_CHARS else None


def _keys(pk: str, sk: str) -> tuple[str, str]:
    """The keys to keep: a participant item's become its message pointer's (no address)."""
    try:
        item = classify(pk, sk)
    except RecordError:
        return pk, sk
    if item.kind is ItemKind.PARTICIPANT and item.message_key:
        return message_pk(item.mailbox_id, item.message_key), "META"
    return pk, sk


def trigger_of(raw: object) -> dict[str, Any]:
    """A stripped record — ``eventName``, ``dynamodb.Keys`` (PK/SK strings) and
    ``dynamodb.SequenceNumber`` where present and well-formed — and nothing else."""
    record = _record(raw)
    if record is None:
        return {}
    trigger: dict[str, Any] = {}
    if record.get("eventName") in _EVENTS:
        trigger["eventName"] = record["eventName"]
    ddb = record.get("dynamodb")
    if not isinstance(ddb, Mapping):
        return trigger
    found: dict[str, Any] = {}
    keys = ddb.get("Keys")
    if isinstance(keys, Mapping):
        pk, sk = _string(keys.get("PK")), _string(keys.get("SK"))
        if pk is not None and sk is not None:
            pk, sk = _keys(pk, sk)
            found["Keys"] = {"PK": {"S": pk}, "SK": {"S": sk}}
    sequence = ddb.get("SequenceNumber")
    if isinstance(sequence, str) and sequence.isdigit() and len(sequence) <= 64:
        found["SequenceNumber"] = sequence
    trigger["dynamodb"] = found
    return trigger
