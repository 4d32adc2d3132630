"""Dead-letter store in Redis (AOF-persisted by ``sidecar stack up``).

One entry per record or message that can never succeed as is, holding only what redrive
needs: the record's keys, event name and sequence number (``indexer.core.dead_letters``) or
the message ref, the stage that failed, the reason, the source and the time — never images,
bodies or participant addresses. Each entry is its own key with an expiry
(``SIDECAR_DLQ_TTL_DAYS``); a sorted set keeps their order and is pruned as entries expire.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, cast

import redis

DAY_S = 86_400


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


class DeadLetterStore:
    def __init__(self, client: redis.Redis, prefix: str, ttl_days: int = 30) -> None:
        self._redis = client
        self._entry = f"{prefix}:dlq:entry:"
        self._order = f"{prefix}:dlq:order"
        self._ttl_s = ttl_days * DAY_S

    def add(
        self,
        *,
        stage: str,
        reason: str,
        payload: Any,
        mailbox_id: str | None = None,
        source: str | None = None,
    ) -> DeadLetter:
        entry = DeadLetter(
            uuid.uuid4().hex, time.time(), stage, reason[:2000], mailbox_id, payload, source
        )
        pipe = self._redis.pipeline(transaction=True)
        pipe.set(self._entry + entry.id, entry.to_json(), ex=self._ttl_s)
        pipe.zadd(self._order, {entry.id: entry.time})
        pipe.zremrangebyscore(self._order, "-inf", entry.time - self._ttl_s)
        pipe.execute()
        return entry

    def get(self, entry_id: str) -> DeadLetter | None:
        raw = self._redis.get(self._entry + entry_id)
        return DeadLetter(**json.loads(cast(bytes, raw))) if raw else None

    def _prune(self) -> None:
        self._redis.zremrangebyscore(self._order, "-inf", time.time() - self._ttl_s)

    def list(self, limit: int | None = None) -> list[DeadLetter]:
        self._prune()
        last = -1 if limit is None else limit - 1
        ids = cast(list[bytes], self._redis.zrange(self._order, 0, last))
        raws = self._redis.mget([self._entry + i.decode() for i in ids]) if ids else []
        return [DeadLetter(**json.loads(r)) for r in cast(list[bytes | None], raws) if r]

    def __iter__(self) -> Iterator[DeadLetter]:
        return iter(self.list())

    def count(self) -> int:
        self._prune()
        return int(self._redis.zcard(self._order))

    def remove(self, entry_id: str) -> bool:
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(self._entry + entry_id)
        pipe.zrem(self._order, entry_id)
        removed, _ = pipe.execute()
        return bool(removed)

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


def remove_task_results(client: redis.Redis, mailbox_id: str) -> int:
    """Delete stored Celery task results that name a mailbox (their ``dead_lettered`` refs);
    they would otherwise keep its message keys until they expire (24 h)."""
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
