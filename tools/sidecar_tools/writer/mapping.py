"""Map one AECS-1 ``NormalizedEmail`` to the mail store's DynamoDB items (pure, no boto3).

The item shapes follow ``shared/reference/store-items.md`` (AECS-1 Appendix C, the DynamoDB
single-table layout and its ``to-rows.mjs``). Items are plain dicts of str/int/bool/None so
they can be compared in tests and serialised by any adapter.

Choices where the sources leave room:

* ``ts`` falls back to ``processing.processedAt``; with neither the email is rejected (the
  sort key must be stable, so the clock is never used for it). ``processed_at`` does fall back
  to ``now`` when absent, as ``to-rows.mjs`` does.
* ``blob_prefix`` is set only when the email has something for the cold tier (``rawFull``,
  ``html`` or attachments), else NULL: ``to-rows.mjs`` sets it only when it writes a blob.
* The Body item stays under DynamoDB's 400 KB item limit: when ``text`` + ``clean`` would
  not fit, ``text`` is shortened first, then ``clean``, each cut on a UTF-8 character
  boundary, and the item gains ``body_truncated = 1`` (absent otherwise). Full-text search
  indexes ``clean``, so it is the last thing to lose.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from indexer.core.items import message_pk, message_sk, thread_pk, ts12
from sidecar_tools.writer.parse import (
    InvalidEmail,
    addresses,
    as_list,
    as_object,
    email_ids,
    opt_str,
    parse_iso,
    sort_ts,
    validate_mailbox_id,
    x_fields,
)

ITEM_BUDGET_BYTES = 400_000  # DynamoDB allows 409,600; keep headroom for its size accounting.
_MAX_PK_BYTES, _MAX_SK_BYTES = 2048, 1024


@dataclass(frozen=True, slots=True)
class ThreadUpdate:
    """What one new message contributes to its thread summary (applied by the store)."""

    pk: str
    thread_key: str
    thread_id: str
    subject: str | None
    ts: int
    message_key: str
    mailbox: str


@dataclass(frozen=True, slots=True)
class MessageItems:
    """Every item one message writes; ``side_items`` are the participant and reference rows."""

    message_key: str
    thread_key: str
    ts: int
    message: dict[str, Any]
    body: dict[str, Any]
    pointer: dict[str, Any]
    participants: list[dict[str, Any]]
    references: list[dict[str, Any]]
    thread: ThreadUpdate

    @property
    def side_items(self) -> list[dict[str, Any]]:
        return [*self.participants, *self.references]


def sha256_hex(value: str) -> str:
    """Fixed-length key of an id (Appendix C.2): lowercase hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def _message(
    email: Mapping[str, Any], mailbox_id: str, ts: int, forai_max_chars: int, now: datetime
) -> dict[str, Any]:
    """The hot row (store-items.md, "Message"); keys are added by :func:`to_items`."""
    meta = as_object(email.get("metadata"), "metadata")
    content = as_object(email.get("content"), "content")
    processing = as_object(email.get("processing"), "processing")
    sender = as_object(meta.get("from"), "metadata.from")
    attachments = as_list(email.get("attachments"), "attachments")
    if not all(isinstance(a, Mapping) for a in attachments):
        raise InvalidEmail("attachments must be a list of objects")
    date = opt_str(meta.get("date"), "metadata.date")
    if date is not None:
        parse_iso(date, "metadata.date")
    raw_full = opt_str(content.get("rawFull"), "content.rawFull")
    cold = raw_full is not None or opt_str(content.get("html"), "content.html") is not None
    forai = opt_str(content.get("forAI"), "content.forAI")
    processed_at = opt_str(processing.get("processedAt"), "processing.processedAt")
    fallback = processing.get("cleanFallback")
    if fallback is not None and not isinstance(fallback, bool):
        raise InvalidEmail("processing.cleanFallback must be a boolean or null")
    mk = sha256_hex(email["messageId"])
    return {
        "mailbox_id": mailbox_id, "message_key": mk, "message_id": email["messageId"],
        "thread_key": sha256_hex(email["threadId"]), "thread_id": email["threadId"],
        "ts": ts, "date": date,
        "from_email": (opt_str(sender.get("email"), "metadata.from.email") or "").strip().lower(),
        "from_name": opt_str(sender.get("name"), "metadata.from.name"),
        "subject": opt_str(meta.get("subject"), "metadata.subject"),
        "in_reply_to": opt_str(as_object(email.get("thread"), "thread").get("inReplyTo"),
                               "thread.inReplyTo"),
        "forai": None if forai is None else forai[:forai_max_chars],
        "attachment_count": len(attachments),
        "size_bytes": None if raw_full is None else len(raw_full.encode("utf-8")),
        "clean_fallback": 1 if fallback else 0,
        "spec_version": (
            opt_str(processing.get("specVersion"), "processing.specVersion") or "unknown"
        ),
        "processed_at": processed_at or now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "blob_prefix": f"aecs/{sha256_hex(mailbox_id)}/{mk}/" if cold or attachments else None,
        "x_fields": x_fields(email),
    }


def item_size(item: Mapping[str, Any]) -> int:
    """DynamoDB's item size: UTF-8 name + value bytes (numbers counted generously)."""
    total = 0
    for name, value in item.items():
        total += len(name.encode("utf-8"))
        if isinstance(value, str):
            total += len(value.encode("utf-8"))
        elif isinstance(value, int) and not isinstance(value, bool):
            total += len(str(abs(value))) // 2 + 2
        else:
            total += 1
    return total


def _cut(value: str, max_bytes: int) -> str:
    """``value`` shortened to at most ``max_bytes`` UTF-8 bytes, never splitting a character."""
    return value.encode("utf-8")[: max(max_bytes, 0)].decode("utf-8", "ignore")


def _body(mailbox_id: str, message_key: str, content: Mapping[str, Any]) -> dict[str, Any]:
    """The warm row; shrinks ``text`` then ``clean`` to fit the item limit (module docstring)."""
    text = opt_str(content.get("text"), "content.text")
    clean = opt_str(content.get("clean"), "content.clean")
    body: dict[str, Any] = {"mailbox_id": mailbox_id, "message_key": message_key}
    keys = {"PK": message_pk(mailbox_id, message_key), "SK": "BODY", "body_truncated": 1}
    budget = ITEM_BUDGET_BYTES - item_size({**body, **keys, "text": "", "clean": ""})
    text_len = len(text.encode("utf-8")) if text else 0
    clean_len = len(clean.encode("utf-8")) if clean else 0
    if text_len + clean_len > budget:
        clean = None if clean is None else _cut(clean, budget)
        text = None if text is None else _cut(text, budget - min(clean_len, budget))
        body["body_truncated"] = 1
    return {**body, "text": text, "clean": clean}


def _check_size(items: list[dict[str, Any]]) -> None:
    for item in items:
        if len(item["PK"].encode("utf-8")) > _MAX_PK_BYTES:
            raise InvalidEmail(f"key longer than {_MAX_PK_BYTES} bytes: {item['PK'][:60]!r}")
        if len(item["SK"].encode("utf-8")) > _MAX_SK_BYTES:
            raise InvalidEmail(f"sort key longer than {_MAX_SK_BYTES} bytes")
        if item_size(item) > ITEM_BUDGET_BYTES:
            raise InvalidEmail(f"item {item['SK'][:20]!r} would exceed DynamoDB's 400 KB limit")


def to_items(
    email: Mapping[str, Any],
    mailbox_id: str,
    *,
    forai_max_chars: int = 8000,
    now: datetime | None = None,
) -> MessageItems:
    """All items of one message, keyed for ``mailbox_id``; raises :class:`InvalidEmail`.

    ``now`` only fills ``processed_at`` when the email lacks ``processing.processedAt``.
    """
    try:
        return _build(email, mailbox_id, forai_max_chars, now or datetime.now(UTC))
    except UnicodeEncodeError:  # JSON may carry lone surrogates; DynamoDB stores UTF-8 only
        raise InvalidEmail("a string holds a lone surrogate and is not valid UTF-8") from None


def _build(
    email: Mapping[str, Any], mailbox_id: str, forai_max_chars: int, now: datetime
) -> MessageItems:
    mailbox = validate_mailbox_id(mailbox_id)
    email, message_id, thread_id = email_ids(email)
    meta = as_object(email.get("metadata"), "metadata")
    processing = as_object(email.get("processing"), "processing")
    ts = sort_ts(meta, opt_str(processing.get("processedAt"), "processing.processedAt"))
    row = _message(email, mailbox, ts, forai_max_chars, now)
    mk, tk = row["message_key"], row["thread_key"]
    message = {"PK": thread_pk(mailbox, tk), "SK": message_sk(ts, mk), **row,
               "GSI1PK": f"M#{mailbox}", "GSI1SK": f"{ts12(ts)}#{mk}"}
    content = as_object(email.get("content"), "content")
    body = {"PK": message_pk(mailbox, mk), "SK": "BODY", **_body(mailbox, mk, content)}
    pointer = {"PK": message_pk(mailbox, mk), "SK": "META", "thread_key": tk, "ts": ts}
    participants = [
        {"PK": f"M#{mailbox}#A#{addr}", "SK": f"{ts12(ts)}#{mk}#{role}", "thread_key": tk,
         "subject": row["subject"], "mailbox_id": mailbox, "message_key": mk, "role": role,
         "email": addr, "name": name, "ts": ts}
        for role, addr, name in addresses(meta)
    ]
    references = _references(email, mailbox, mk, message_id, ts)
    _check_size([message, body, pointer, *participants, *references])
    update = ThreadUpdate(thread_pk(mailbox, tk), tk, thread_id, row["subject"], ts, mk, mailbox)
    return MessageItems(mk, tk, ts, message, body, pointer, participants, references, update)


def _references(
    email: Mapping[str, Any], mailbox: str, mk: str, message_id: str, ts: int
) -> list[dict[str, Any]]:
    """One row per distinct References entry (first position wins; empty entries skipped)."""
    thread = as_object(email.get("thread"), "thread")
    rows: dict[str, dict[str, Any]] = {}
    for position, ref in enumerate(as_list(thread.get("references"), "thread.references")):
        if not isinstance(ref, str):
            raise InvalidEmail(f"thread.references[{position}] must be a string")
        ref_key = sha256_hex(ref)
        if ref and ref_key not in rows:
            rows[ref_key] = {"PK": f"M#{mailbox}#R#{ref_key}", "SK": mk, "message_id": message_id,
                             "ts": ts, "ref_id": ref, "position": position}
    return list(rows.values())


def _summary(mailbox_id: str, thread_key: str, thread_id: str, subject: str | None,
             first: int, last: int, count: int, last_key: str) -> dict[str, Any]:
    """The summary's attributes (store-items.md "Thread summary"), besides PK/SK."""
    return {"thread_id": thread_id, "subject": subject, "first_ts": first, "last_ts": last,
            "message_count": count, "last_message_key": last_key,
            "GSI2PK": f"M#{mailbox_id}#THREADS", "GSI2SK": f"{ts12(last)}#{thread_key}"}


def thread_after_insert(current: Mapping[str, Any] | None, update: ThreadUpdate) -> dict[str, Any]:
    """The thread summary once ``update``'s message is added to ``current`` (None: new thread).

    ``first_ts``/``subject`` come from the earliest message, ``last_ts``/``last_message_key``
    from the latest by (ts, message_key) — the GSI1 order — so arrival order does not matter.
    """
    first, last, last_key = update.ts, update.ts, update.message_key
    subject, count = update.subject, 0
    if current is not None:
        first, last = int(current["first_ts"]), int(current["last_ts"])
        last_key, subject = current["last_message_key"], current.get("subject")
        count = int(current["message_count"])
        if update.ts < first:
            first, subject = update.ts, update.subject
        if (update.ts, update.message_key) > (last, last_key):
            last, last_key = update.ts, update.message_key
    return _summary(update.mailbox, update.thread_key, update.thread_id, subject, first, last,
                    count + 1, last_key)


def thread_summary(
    mailbox_id: str, thread_key: str, messages: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The summary recomputed from a thread's Message items in SK order (oldest first).

    Used after a delete and by bulk loads; None means no message is left (delete it).
    """
    if not messages:
        return None
    oldest, newest = messages[0], messages[-1]
    return _summary(mailbox_id, thread_key, oldest["thread_id"], oldest.get("subject"),
                    int(oldest["ts"]), int(newest["ts"]), len(messages), newest["message_key"])
