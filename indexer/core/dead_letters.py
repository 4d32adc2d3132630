"""What a dead letter keeps of a record: only what redrive needs (pure).

Stream records are triggers — the worker re-reads the table — so a redrive needs the item's
keys, the event name and the sequence number, never the images (bodies, subjects, bcc
participant items). A participant item's key holds an address (``M#<M>#A#<email>``), so a
participant record is kept as its *message's* pointer key instead: redriving it re-reads and
re-indexes that message; the participant row itself is restored by the next record for it
or by ``sidecar backfill`` (documented in the README's dead-letter section). That holds for a
malformed participant record too (any key under an ``M#<M>#A#`` partition): its SK's message
key, when one is there, makes the pointer; otherwise no keys are kept at all.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from indexer.core.errors import RecordError
from indexer.core.items import ItemKind, classify, message_pk
from indexer.core.records import EventName

_EVENTS = frozenset(e.value for e in EventName)
_HEX64 = re.compile(r"[0-9a-f]{64}")
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


def _participant_pointer(pk: str, sk: str) -> tuple[str, str] | None:
    """For a participant partition (``M#<M>#A#<address>``) whose keys do not parse: the
    message pointer when the mailbox and a message key (a 64-hex part of the SK) are there,
    else None. Never the PK (it holds the address) nor the SK (it might)."""
    mailbox = pk.split("#", 3)[1]
    key = next((part for part in sk.split("#") if _HEX64.fullmatch(part)), None)
    return (message_pk(mailbox, key), "META") if mailbox and key else None


def _keys(pk: str, sk: str) -> tuple[str, str] | None:
    """The keys to keep: a participant item's become its message pointer's (no address);
    None when a participant record's keys name no message."""
    try:
        item = classify(pk, sk)
    except RecordError:
        parts = pk.split("#", 3)
        participant = len(parts) == 4 and parts[0] == "M" and parts[2] == "A"
        return _participant_pointer(pk, sk) if participant else (pk, sk)
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
        kept = _keys(pk, sk) if pk is not None and sk is not None else None
        if kept is not None:
            found["Keys"] = {"PK": {"S": kept[0]}, "SK": {"S": kept[1]}}
    sequence = ddb.get("SequenceNumber")
    if isinstance(sequence, str) and sequence.isdigit() and len(sequence) <= 64:
        found["SequenceNumber"] = sequence
    trigger["dynamodb"] = found
    return trigger
