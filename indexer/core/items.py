"""Classify a store item by its PK/SK (single-table layout of AECS-1 Appendix C).

The mailbox id is used raw inside keys and may hold any printable character except ``#``, so
keys are split on ``#`` and every hashed part is checked to be 64 lowercase hex characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from indexer.core.errors import RecordError

_HEX64 = re.compile(r"[0-9a-f]{64}")
_TS12 = re.compile(r"[0-9]{12}")
ROLES = frozenset({"from", "to", "cc", "bcc"})


class ItemKind(StrEnum):
    MESSAGE = "message"
    BODY = "body"
    POINTER = "pointer"
    THREAD = "thread"
    PARTICIPANT = "participant"
    REFERENCE = "reference"


@dataclass(frozen=True, slots=True)
class ItemRef:
    """Where an item sits and which message it belongs to (None for thread summaries)."""

    kind: ItemKind
    mailbox_id: str
    message_key: str | None
    pk: str
    sk: str
    thread_key: str | None = None
    role: str | None = None


def _hex(value: str, what: str) -> str:
    if not _HEX64.fullmatch(value):
        raise RecordError(f"{what} is not a 64-hex key")
    return value


def _split_pk(pk: str) -> tuple[str, str, str]:
    parts = pk.split("#", 3)
    if len(parts) != 4 or parts[0] != "M" or not parts[1]:
        raise RecordError("PK does not follow M#<mailbox>#<type>#<key>")
    return parts[1], parts[2], parts[3]


def _thread_item(mailbox: str, pk: str, sk: str, thread_key: str) -> ItemRef:
    if sk == "THREAD":
        return ItemRef(ItemKind.THREAD, mailbox, None, pk, sk, thread_key=thread_key)
    parts = sk.split("#")
    if len(parts) == 3 and parts[0] == "MSG" and _TS12.fullmatch(parts[1]):
        key = _hex(parts[2], "message key")
        return ItemRef(ItemKind.MESSAGE, mailbox, key, pk, sk, thread_key=thread_key)
    raise RecordError("unknown item under a thread partition")


def _participant(mailbox: str, pk: str, sk: str) -> ItemRef:
    parts = sk.split("#")
    if len(parts) != 3 or not _TS12.fullmatch(parts[0]) or parts[2] not in ROLES:
        raise RecordError("participant SK does not follow <ts12>#<message_key>#<role>")
    key = _hex(parts[1], "message key")
    return ItemRef(ItemKind.PARTICIPANT, mailbox, key, pk, sk, role=parts[2])


def classify(pk: str, sk: str) -> ItemRef:
    """The item's kind and owner; raises :class:`RecordError` for an item of unknown shape."""
    mailbox, kind, key = _split_pk(pk)
    if kind == "T":
        return _thread_item(mailbox, pk, sk, _hex(key, "thread key"))
    if kind == "MSG":
        message_key = _hex(key, "message key")
        if sk == "BODY":
            return ItemRef(ItemKind.BODY, mailbox, message_key, pk, sk)
        if sk == "META":
            return ItemRef(ItemKind.POINTER, mailbox, message_key, pk, sk)
        raise RecordError("unknown item under a message partition")
    if kind == "A":
        return _participant(mailbox, pk, sk)
    if kind == "R":
        _hex(key, "reference key")
        return ItemRef(ItemKind.REFERENCE, mailbox, _hex(sk, "message key"), pk, sk)
    raise RecordError(f"unknown item type {kind[:10]!r} in PK")


def ts12(ts: int) -> str:
    """The zero-padded sort-key form of an epoch-seconds timestamp."""
    return f"{ts:012d}"


# Key builders (store-items.md "Keys"): the one set, used by the core, the adapters and the
# store writer alike.
def thread_pk(mailbox_id: str, thread_key: str) -> str:
    """A thread's partition: its Message items (``SK = MSG#<ts12>#<key>``) and its summary."""
    return f"M#{mailbox_id}#T#{thread_key}"


def message_sk(ts: int, message_key: str) -> str:
    return f"MSG#{ts12(ts)}#{message_key}"


def message_pk(mailbox_id: str, message_key: str) -> str:
    """A message's own partition: its Body (``SK = BODY``) and META pointer (``SK = META``)."""
    return f"M#{mailbox_id}#MSG#{message_key}"
