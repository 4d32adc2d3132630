"""Store, delete and rewrite messages in the mail store: the user's writer, played for tests.

Not the sidecar's runtime path: it fills a table as the user's writer would, so the demo, tests
and benchmarks have real items and stream records.

Thread summary, optimistic and inside the message's one transaction: the summary is read
(consistent GetItem), :func:`thread_after_insert` computes its new values (``last_ts`` a true
max, ``first_ts`` a true min), and the transaction writes them on condition that the summary
still holds what was read: ``attribute_not_exists(PK)`` for a new thread (a Put, so the stream
shows one INSERT), else equality on ``message_count``/``first_ts``/``last_ts``/
``last_message_key`` with ``ADD message_count :one``. A concurrent writer fails that condition;
the summary is re-read and the transaction retried. A re-delivered message fails
``attribute_not_exists(PK)`` on its Message, Body or pointer, so nothing changes.

A transaction holds at most 100 items: Message, Body, pointer and summary always go in, with
as many participant/reference items as fit; the rest follow at once as BatchWriteItem puts (or
deletes), which are idempotent.

File-level operations (reading NormalizedEmail files, ``load_file``, ``rewrite_file``)
live in :mod:`sidecar_tools.writer.files`; :func:`store_bulk` is the per-message step of its bulk
mode.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from indexer.adapters.aws.io import items
from indexer.adapters.dynamodb.tables import create, mail_table_spec
from indexer.core.items import message_pk, message_sk, thread_pk
from sidecar_tools.writer.mapping import (
    MessageItems,
    sha256_hex,
    thread_after_insert,
    thread_summary,
)
from sidecar_tools.writer.parse import validate_mailbox_id

_TXN_LIMIT, _BATCH_LIMIT, _ATTEMPTS = 100, 25, 6
_TRANSIENT = frozenset({
    "TransactionConflictException", "TransactionInProgressException", "ThrottlingException",
    "ProvisionedThroughputExceededException", "RequestLimitExceeded", "InternalServerError",
    "ServiceUnavailable",
})
_RETRY_REASONS = frozenset({
    "None", "ConditionalCheckFailed", "TransactionConflict", "ThrottlingError",
    "ProvisionedThroughputExceeded", "RequestLimitExceeded",
})
_SER, _DESER = TypeSerializer(), TypeDeserializer()
_THREAD_GUARD = (
    "message_count = :c0 AND first_ts = :f0 AND last_ts = :l0 AND last_message_key = :k0"
)
Op = dict[str, Any]


class WriterError(RuntimeError):
    """DynamoDB kept failing transiently; the write was not applied."""


def _dump(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _SER.serialize(v) for k, v in item.items()}


def _load(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _DESER.deserialize(v) for k, v in item.items()}


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def _backoff(attempt: int) -> None:
    time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.0))


def create_table(client: Any, table: str) -> bool:
    """Create the store table (GSI1 inbox, GSI2 threads, NEW_AND_OLD_IMAGES stream), defined
    once in :mod:`indexer.adapters.dynamodb.tables` (``sidecar init --mail-table`` makes the same).

    Idempotent: an existing table is left as is. Returns True when this call created it.
    """
    return create(client, mail_table_spec(table))


def _transact(client: Any, build: Callable[[], list[Op]], identity: int) -> bool:
    """Run the transaction ``build()`` returns, rebuilding it after races and transient errors.

    False when one of its first ``identity`` operations failed its condition (the message is
    already stored / not stored). A failed condition further on is a lost race on the thread
    summary: the summary is re-read by ``build`` and the transaction retried.
    """
    for attempt in range(_ATTEMPTS):
        try:
            ops = build()
            if ops:
                client.transact_write_items(TransactItems=ops)
            return True
        except ClientError as err:
            code = err.response["Error"]["Code"]
            reasons = [str(r.get("Code")) for r in err.response.get("CancellationReasons", [])]
            if "ConditionalCheckFailed" in reasons[:identity]:
                return False
            if code == "TransactionCanceledException":
                if not reasons or not set(reasons) <= _RETRY_REASONS:
                    raise
            elif code not in _TRANSIENT:
                raise
        _backoff(attempt)
    raise WriterError(f"transaction still failing after {_ATTEMPTS} attempts")


def _batch_write(client: Any, table: str, requests: list[Op]) -> None:
    """Idempotent overflow writes, resending unprocessed items with backoff."""
    for start in range(0, len(requests), _BATCH_LIMIT):
        pending = requests[start : start + _BATCH_LIMIT]
        for attempt in range(_ATTEMPTS):
            out = client.batch_write_item(RequestItems={table: pending})
            pending = out.get("UnprocessedItems", {}).get(table, [])
            if not pending:
                break
            _backoff(attempt)
        else:
            raise WriterError(f"{len(pending)} overflow items still unprocessed")


def _get(client: Any, table: str, pk: str, sk: str) -> dict[str, Any] | None:
    item = client.get_item(TableName=table, Key=_key(pk, sk), ConsistentRead=True).get("Item")
    return None if item is None else _load(item)


def _put(table: str, item: Mapping[str, Any], condition: str | None = None) -> Op:
    put: Op = {"TableName": table, "Item": _dump(item)}
    if condition:
        put["ConditionExpression"] = condition
    return {"Put": put}


def _guard_values(current: Mapping[str, Any]) -> dict[str, Any]:
    names = {":c0": "message_count", ":f0": "first_ts", ":l0": "last_ts",
             ":k0": "last_message_key"}
    return {k: _SER.serialize(current[v]) for k, v in names.items()}


def _thread_update(table: str, pk: str, current: Mapping[str, Any], new: Mapping[str, Any]) -> Op:
    """SET the summary's new values and ADD the count change, guarded by what was read."""
    delta = int(new["message_count"]) - int(current["message_count"])
    sets = {k: v for k, v in new.items() if k != "message_count"}
    names = {f"#a{i}": k for i, k in enumerate(sets)}
    values = {f":v{i}": _SER.serialize(v) for i, v in enumerate(sets.values())}
    assignments = ", ".join(f"#a{i} = :v{i}" for i in range(len(sets)))
    return {"Update": {
        "TableName": table, "Key": _key(pk, "THREAD"),
        "UpdateExpression": f"SET {assignments} ADD message_count :delta",
        "ConditionExpression": _THREAD_GUARD,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {
            **values, ":delta": {"N": str(delta)}, **_guard_values(current)
        },
    }}


def store_message(client: Any, table: str, items: MessageItems) -> bool:
    """Store one message atomically; False (and no change at all) when it is already stored.

    The META pointer is checked first: a re-delivery then costs one read instead of a failed
    transaction (which DynamoDB bills, and moto pays for with a copy of the whole table).
    """
    if _get(client, table, items.pointer["PK"], "META") is not None:
        return False
    not_there = "attribute_not_exists(PK)"
    head = [_put(table, i, not_there) for i in (items.message, items.body, items.pointer)]
    room = _TXN_LIMIT - len(head) - 1
    side = [_put(table, i) for i in items.side_items]

    def build() -> list[Op]:
        current = _get(client, table, items.thread.pk, "THREAD")
        new = thread_after_insert(current, items.thread)
        if current is None:
            thread = _put(table, {"PK": items.thread.pk, "SK": "THREAD", **new}, not_there)
        else:
            thread = _thread_update(table, items.thread.pk, current, new)
        return [*head, thread, *side[:room]]

    if not _transact(client, build, identity=len(head)):
        return False
    _batch_write(client, table, [{"PutRequest": {"Item": p["Put"]["Item"]}} for p in side[room:]])
    return True


def store_bulk(client: Any, table: str, items: MessageItems) -> bool:
    """Non-atomic store for bulk loads (``writer.files``); the pointer goes last."""
    if _get(client, table, items.pointer["PK"], "META") is not None:
        return False
    rows = [items.message, items.body, *items.side_items]
    _batch_write(client, table, [{"PutRequest": {"Item": _dump(i)}} for i in rows])
    client.put_item(TableName=table, Item=_dump(items.pointer))
    return True


def rewrite_message(client: Any, table: str, items: MessageItems) -> bool:
    """Replace the Message and Body in place (a re-parse); False when they are not stored.

    Same keys, so the stream shows MODIFY; participants, references and summary are kept.
    A re-parse that moves ``ts`` changes the Message key and is refused (False).
    """
    there = "attribute_exists(PK)"
    ops = [_put(table, items.message, there), _put(table, items.body, there)]
    return _transact(client, lambda: ops, identity=len(ops))


def _side_keys(client: Any, table: str, mailbox_id: str, message_key: str) -> list[Op]:
    """Keys of a message's participant and reference items.

    A paginated Scan: acceptable for this test writer only (no index leads from a message to
    these rows; a production writer would rebuild their keys from the stored email).
    """
    return list(items(
        client, "scan", ConsistentRead=True, TableName=table, ProjectionExpression="PK, SK",
        FilterExpression="(begins_with(PK, :a) AND message_key = :mk) "
        "OR (begins_with(PK, :r) AND SK = :mk)",
        ExpressionAttributeValues={":a": {"S": f"M#{mailbox_id}#A#"},
                                   ":r": {"S": f"M#{mailbox_id}#R#"}, ":mk": {"S": message_key}},
    ))


def _thread_messages(client: Any, table: str, pk: str, skip_sk: str = "") -> list[Op]:
    """The thread's Message items oldest first (SK order), without ``skip_sk``."""
    rows = items(
        client, "query", ConsistentRead=True, TableName=table,
        ProjectionExpression="SK, ts, message_key, subject, thread_id",
        KeyConditionExpression="PK = :pk AND begins_with(SK, :msg)",
        ExpressionAttributeValues={":pk": {"S": pk}, ":msg": {"S": "MSG#"}},
    )
    return [_load(i) for i in rows if i["SK"]["S"] != skip_sk]


def _recompute_op(
    client: Any, table: str, mailbox_id: str, thread_key: str, skip_sk: str = ""
) -> Op | None:
    """The guarded write making the summary match the thread's Message items (None: it does)."""
    pk = thread_pk(mailbox_id, thread_key)
    current = _get(client, table, pk, "THREAD")
    new = thread_summary(mailbox_id, thread_key, _thread_messages(client, table, pk, skip_sk))
    if new is None and current is None:
        return None
    if new is None:
        return {"Delete": {
            "TableName": table, "Key": _key(pk, "THREAD"), "ConditionExpression": _THREAD_GUARD,
            "ExpressionAttributeValues": _guard_values(current or {}),
        }}
    if current is None:
        return _put(table, {"PK": pk, "SK": "THREAD", **new}, "attribute_not_exists(PK)")
    if all(current.get(k) == v for k, v in new.items()):
        return None
    return _thread_update(table, pk, current, new)


def refresh_thread(client: Any, table: str, mailbox_id: str, thread_key: str) -> None:
    """Recompute one thread summary from its Message items (bulk loads, repairs)."""

    def build() -> list[Op]:
        op = _recompute_op(client, table, mailbox_id, thread_key)
        return [op] if op else []

    _transact(client, build, identity=0)


def delete_message(
    client: Any, table: str, mailbox_id: str, message_id: str, stored: MessageItems | None = None
) -> bool:
    """Delete every item of a message and fix its thread summary; False when not stored.

    Found through its META pointer. In the same transaction, guarded like a store, the summary
    is recomputed from the thread's remaining Message items (Query), or deleted if none remain.
    ``stored`` (the items the email was stored as) names its participant and reference rows,
    as a production writer would from the stored email; without it they are found by Scan.
    """
    mk = sha256_hex(message_id)
    mpk = message_pk(validate_mailbox_id(mailbox_id), mk)
    pointer = _get(client, table, mpk, "META")
    if pointer is None:
        return False
    thread_key = str(pointer["thread_key"])
    tpk, msk = thread_pk(mailbox_id, thread_key), message_sk(int(pointer["ts"]), mk)
    there = "attribute_exists(PK)"
    head = [
        {"Delete": {"TableName": table, "Key": _key(tpk, msk), "ConditionExpression": there}},
        {"Delete": {"TableName": table, "Key": _key(mpk, "META"), "ConditionExpression": there}},
        {"Delete": {"TableName": table, "Key": _key(mpk, "BODY")}},
    ]
    side_keys = (
        [_key(i["PK"], i["SK"]) for i in stored.side_items]
        if stored is not None
        else _side_keys(client, table, mailbox_id, mk)
    )
    side = [{"Delete": {"TableName": table, "Key": k}} for k in side_keys]
    room = _TXN_LIMIT - len(head) - 1

    def build() -> list[Op]:
        thread = _recompute_op(client, table, mailbox_id, thread_key, msk)
        return [*head, *([thread] if thread else []), *side[:room]]

    if not _transact(client, build, identity=2):
        return False
    _batch_write(client, table, [{"DeleteRequest": {"Key": k}} for k in side_keys[room:]])
    return True
