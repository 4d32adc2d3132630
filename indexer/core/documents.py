"""Project a message's table state into the search document and the vector point.

Pure functions over plain values: what the table holds in, what each index must hold out.
``forai``, html and ``bcc`` never reach the full-text document; the vector is made from
``forai`` (with the subject, under the default recipe: :mod:`indexer.core.recipes`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from indexer.core.language import language_fields
from indexer.core.plan import MessageRef
from indexer.core.recipes import DEFAULT_RECIPE, Recipe, embedded_text

# Fixed namespace so ids are stable across processes, releases and both engines.
_ID_NAMESPACE = uuid.UUID("6f1c7a52-3a43-4d0e-9a55-5e3b2b8d1c20")


def point_id(ref: MessageRef) -> str:
    """Deterministic UUID of (mailbox_id, message_key): Qdrant point id and OpenSearch ``_id``.

    Hashing keeps the untrusted mailbox id out of engine keys; ``#`` never occurs in a mailbox
    id and the message key is fixed-length hex, so the joined name is unambiguous.
    """
    return str(uuid.uuid5(_ID_NAMESPACE, f"{ref.mailbox_id}#{ref.message_key}"))


def text_hash(text: str) -> str:
    """Content hash of an embedded text: the embedding cache key and the 'unchanged' check."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Participant:
    role: str
    email: str
    name: str | None


@dataclass(frozen=True, slots=True)
class MessageState:
    """What the table holds for one message right now (``message`` None = gone)."""

    ref: MessageRef
    message: Mapping[str, Any] | None
    body: Mapping[str, Any] | None
    participants: Sequence[Participant] = ()


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _iso_date(value: object) -> str | None:
    """The message's true date if it parses; a bad string must not make the document poison."""
    text = _str(value)
    if not text:
        return None
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return text


def _addresses(participants: Sequence[Participant], role: str) -> list[str]:
    return sorted({p.email for p in participants if p.role == role and p.email})


def _names(participants: Sequence[Participant], role: str) -> list[str]:
    return sorted({p.name for p in participants if p.role == role and p.name})


def search_document(state: MessageState) -> dict[str, Any] | None:
    """The OpenSearch document of a stored message, or None when the message is gone."""
    msg = state.message
    if msg is None:
        return None
    body = state.body or {}
    people = state.participants
    return {
        "mailbox_id": state.ref.mailbox_id,
        "message_key": state.ref.message_key,
        "message_id": _str(msg.get("message_id")),
        "thread_key": _str(msg.get("thread_key")),
        "thread_id": _str(msg.get("thread_id")),
        "subject": _str(msg.get("subject")),
        "clean": _str(body.get("clean")),
        "from": {
            "address": _str(msg.get("from_email")) or None,
            "name": _str(msg.get("from_name")),
        },
        "to": _addresses(people, "to"),
        "to_names": _names(people, "to"),
        "cc": _addresses(people, "cc"),
        "cc_names": _names(people, "cc"),
        "ts": _int(msg.get("ts")),
        "date": _iso_date(msg.get("date")),
        "attachment_count": _int(msg.get("attachment_count")) or 0,
        "size_bytes": _int(msg.get("size_bytes")),
        "clean_fallback": bool(_int(msg.get("clean_fallback"))),
        "spec_version": _str(msg.get("spec_version")) or "unknown",
        "in_reply_to": _str(msg.get("in_reply_to")),
        # mapping v7: the detected language, and subject and body stemmed in it
        **language_fields(_str(msg.get("subject")), _str(body.get("clean"))),
    }


def document_hash(doc: Mapping[str, Any] | None) -> str:
    """Stable fingerprint of a projection; equal hashes mean nothing to rewrite."""
    return text_hash(json.dumps(doc, sort_keys=True, ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class VectorTarget:
    """What the vector index must hold for one message: a point, or nothing (``text`` None)."""

    ref: MessageRef
    text: str | None
    payload: Mapping[str, Any]


def vector_target(state: MessageState, recipe: Recipe = DEFAULT_RECIPE) -> VectorTarget:
    """A point per stored message with a non-empty ``forai``; otherwise no point at all.

    The text is the recipe's (``recipe``: the one the target collection is named after), and
    ``content_hash`` covers all of it: a change of recipe re-embeds, the same text does not.
    """
    msg = state.message
    if msg is None:
        return VectorTarget(state.ref, None, {})
    text = embedded_text(recipe, _str(msg.get("subject")), _str(msg.get("forai")))
    if text is None:
        return VectorTarget(state.ref, None, {})
    payload = {
        "mailbox_id": state.ref.mailbox_id,
        "message_key": state.ref.message_key,
        "thread_key": _str(msg.get("thread_key")),
        "ts": _int(msg.get("ts")),
        "from": _str(msg.get("from_email")) or None,
        "content_hash": text_hash(text),
    }
    return VectorTarget(state.ref, text, payload)
