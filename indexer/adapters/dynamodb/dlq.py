"""Dead-letter store in the sidecar's own DynamoDB table (beside the checkpoints and leases).

Not in Redis: ElastiCache's default ``maxmemory-policy`` (``volatile-lru``) evicts keys with an
expiry first, and dead letters were exactly those keys. A table item is not evicted.

One entry per record or message that can never succeed as is, holding only what redrive
needs: the record's keys, event name and sequence number (``indexer.core.dead_letters``,
applied here once more to every decode entry, so no caller can store an image) or the message
ref, the stage that failed, the reason, the source and the time — never images, bodies or
participant addresses. Layout:

- ``PK=DLQ#<queue prefix>``: one partition per store (deployments sharing the table apart).
- ``SK=<id>``: 32 hex characters, like the uuid4 ids of before, but the first 16 are the
  microseconds of the entry's time — so a Query returns entries oldest first, and an entry is
  read or deleted by its id alone (``GetItem`` / ``DeleteItem``, no index).
- ``entry``: the :class:`DeadLetter`'s JSON, as redrive and ``sidecar dlq show`` read it.
- ``ttl`` (:data:`indexer.adapters.dynamodb.tables.TTL_ATTRIBUTE`): epoch seconds of time +
  ``SIDECAR_DLQ_TTL_DAYS``; the table's TTL attribute (``sidecar init`` enables it). DynamoDB
  deletes expired items in the background, typically within days of the expiry, so every read
  here filters out entries whose ``ttl`` has passed.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import lru_cache
from itertools import islice
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.io import classify_error, error_code, items, pages
from indexer.adapters.dynamodb.tables import TTL_ATTRIBUTE
from indexer.core.dead_letters import trigger_of
from indexer.settings import Settings

DAY_S = 86_400
PAGE = 500  # items per Query page: a page stays well under DynamoDB's 1 MB


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: str
    time: float
    stage: str  # decode | fulltext | vectors
    reason: str
    mailbox_id: str | None
    payload: Any  # decode: the stripped record; a sink stage: {"messages": [ref], ...}
    source: str | None = None

    def to_json(self) -> str:
        # ensure_ascii: a reason may quote lone surrogates that UTF-8 cannot carry.
        return json.dumps(asdict(self), ensure_ascii=True)


def new_id(now: float) -> str:
    """Time-ordered id: 16 hex digits of epoch microseconds, then 16 random hex digits."""
    return f"{int(now * 1_000_000):016x}{secrets.token_hex(8)}"


class DeadLetterStore:
    """The dead letters of one queue prefix in the sidecar's table ``table``."""

    def __init__(
        self,
        client: Any,
        table: str,
        prefix: str,
        ttl_days: int = 30,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = table
        self._pk = {"S": f"DLQ#{prefix}"}
        self._ttl_s = ttl_days * DAY_S
        self._clock = clock

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        """One DynamoDB call, its errors classified (throttling is transient)."""
        try:
            response: dict[str, Any] = getattr(self._client, operation)(
                TableName=self._table, **kwargs
            )
        except (ClientError, BotoCoreError) as exc:
            mapped = classify_error(exc)
            if mapped is exc:
                raise  # unexpected (a failed condition, access denied, no table): as is
            raise mapped from exc
        return response

    def _key(self, entry_id: str) -> dict[str, Any]:
        return {"PK": self._pk, "SK": {"S": entry_id}}

    def add(
        self,
        *,
        stage: str,
        reason: str,
        payload: Any,
        mailbox_id: str | None = None,
        source: str | None = None,
    ) -> DeadLetter:
        now = self._clock()
        if stage == "decode":  # only the trigger, whatever a caller passes (a Lambda record)
            payload = trigger_of(payload)
        entry = DeadLetter(new_id(now), now, stage, reason[:2000], mailbox_id, payload, source)
        self._call(
            "put_item",
            Item={
                **self._key(entry.id),
                "entry": {"S": entry.to_json()},
                TTL_ATTRIBUTE: {"N": str(int(now + self._ttl_s))},
            },
            ConditionExpression="attribute_not_exists(PK)",  # never overwrite an entry
        )
        return entry

    def _live(self, item: dict[str, Any], now: float) -> DeadLetter | None:
        """The entry of an item, or None once its ``ttl`` passed (DynamoDB deletes late)."""
        if float(item.get(TTL_ATTRIBUTE, {}).get("N", "inf")) <= now:
            return None
        return DeadLetter(**json.loads(item["entry"]["S"]))

    def get(self, entry_id: str) -> DeadLetter | None:
        if not entry_id:
            return None  # an empty key is a ValidationException, not a miss
        found = self._call("get_item", Key=self._key(entry_id), ConsistentRead=True)
        return self._live(found["Item"], self._clock()) if "Item" in found else None

    def _query(self, **kwargs: Any) -> dict[str, Any]:
        """Query arguments for this store's live entries, oldest first."""
        return {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk",
            "FilterExpression": "#ttl > :now",
            "ExpressionAttributeNames": {"#ttl": TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":pk": self._pk, ":now": {"N": str(int(self._clock()))}},
            "Limit": PAGE,
            **kwargs,
        }

    def __iter__(self) -> Iterator[DeadLetter]:
        """Live entries, oldest first, read page by page (boto3's paginator)."""
        now = self._clock()
        for item in items(self._client, "query", **self._query(ConsistentRead=True)):
            entry = self._live(item, now)
            if entry is not None:
                yield entry

    def list(self, limit: int | None = None) -> list[DeadLetter]:
        return list(islice(self, limit))

    def count(self, cap: int | None = None) -> int:
        """Live entries (an eventually consistent ``Select=COUNT``); with ``cap`` the count
        stops once it reaches it, so a scrape of a huge store reads a bounded number of items
        (DynamoDB bills a COUNT for every item it reads)."""
        total = 0
        for page in pages(self._client, "query", **self._query(Select="COUNT")):
            total += int(page.get("Count", 0))
            if cap is not None and total >= cap:
                return cap
        return total

    def remove(self, entry_id: str) -> bool:
        """Delete an entry; False when it was not there (removed by another redrive)."""
        if not entry_id:
            return False
        try:
            self._call(
                "delete_item", Key=self._key(entry_id), ConditionExpression="attribute_exists(PK)"
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def remove_mailbox(self, mailbox_id: str) -> int:
        """Remove every entry naming a mailbox: by its ``mailbox_id``, or — for undecodable
        records, which have none — by a key of that mailbox (``M#<mailbox>#``) in the record."""
        needle = json.dumps(f"M#{mailbox_id}#", ensure_ascii=True)[1:-1]
        removed = 0
        for entry in self.list():
            named = entry.mailbox_id == mailbox_id or (
                entry.mailbox_id is None and needle in json.dumps(entry.payload, ensure_ascii=True)
            )
            if named and self.remove(entry.id):
                removed += 1
        return removed


@lru_cache(maxsize=4)
def dead_letters(settings: Settings) -> DeadLetterStore:
    """The deployment's store (one per process and settings): the sidecar's table, a
    partition per queue prefix. Here, not in ``factories``: the broker's gauges read it too."""
    return DeadLetterStore(
        aws.client(settings, "dynamodb"),
        settings.resolved_state_table,
        settings.queue_prefix,
        settings.dlq_ttl_days,
    )


def remove_task_results(client: Any, mailbox_id: str) -> int:
    """Delete stored Celery task results (in Redis, the result backend) that name a mailbox
    (their ``dead_lettered`` refs); they would otherwise keep its message keys until they
    expire (24 h). Not dead letters: kept here because ``sidecar purge`` imports it here."""
    removed = 0
    for key in client.scan_iter(match="celery-task-meta-*", count=500):
        raw = client.get(key)
        try:
            result = json.loads(raw).get("result") if raw else None
        except ValueError:
            continue
        refs = result.get("dead_lettered", []) if isinstance(result, dict) else []
        if any(isinstance(r, list) and r[:1] == [mailbox_id] for r in refs):
            removed += int(client.delete(key))
    return removed
