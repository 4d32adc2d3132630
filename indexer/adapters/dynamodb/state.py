"""The readers' state in the sidecar's own DynamoDB table: shard checkpoints, the
single-reader lease, and the backfill's marks.

Both live in DynamoDB, not Redis, so losing the broker never rewinds or forgets a position:
- ``PK=CKPT#<stream_arn>``, ``SK=<shard_id>``: the last *applied* ``SequenceNumber`` and
  ``done`` once a closed shard was read to its end. Written only after the page's tasks were
  applied, so a crash re-reads at most one page (records are triggers, so replays are harmless).
- ``PK=LEASE#<table>``, ``SK=LEASE``: owner id and expiry epoch. Only the holder reads the
  stream; conditional writes make acquire/renew/release safe between processes, and a standby
  takes over once the holder stops renewing (dies) and the expiry passes.
- ``PK=BACKFILL#...`` / ``SCAN#...``: a backfill's marks (data files or scan segments done).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from indexer.adapters.aws.io import error_code, items

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShardCheckpoint:
    """Where a shard's applied records end; ``done`` = closed shard read to its end;
    ``created`` = the last applied record's ApproximateCreationDateTime (epoch seconds), from
    which a stream gap's repair export starts."""

    shard_id: str
    sequence: str | None
    done: bool = False
    created: int | None = None


class ShardCheckpointStore:
    """Checkpoints of one stream (by ARN: a re-enabled stream starts afresh)."""

    def __init__(self, client: Any, state_table: str, stream_arn: str, reader: str = "") -> None:
        """``reader`` names one of several readers that each keep their own position."""
        self._client = client
        self._table = state_table
        self._pk = f"CKPT#{stream_arn}" + (f"#{reader}" if reader else "")

    def load(self) -> dict[str, ShardCheckpoint]:
        """Every shard's checkpoint (strongly consistent, paged Query)."""
        found: dict[str, ShardCheckpoint] = {}
        rows = items(
            self._client,
            "query",
            TableName=self._table,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": self._pk}},
            ConsistentRead=True,
        )
        for item in rows:
            seq = item.get("sequence", {}).get("S")
            done = bool(item.get("done", {}).get("BOOL", False))
            created = item.get("created", {}).get("N")
            found[item["SK"]["S"]] = ShardCheckpoint(
                item["SK"]["S"], seq, done, int(created) if created else None
            )
        return found

    def save(self, checkpoint: ShardCheckpoint) -> None:
        item: dict[str, Any] = {
            "PK": {"S": self._pk},
            "SK": {"S": checkpoint.shard_id},
            "done": {"BOOL": checkpoint.done},
            "updated": {"N": str(int(time.time()))},
        }
        if checkpoint.sequence is not None:
            item["sequence"] = {"S": checkpoint.sequence}
        if checkpoint.created is not None:
            item["created"] = {"N": str(checkpoint.created)}
        self._client.put_item(TableName=self._table, Item=item)


def new_owner_id() -> str:
    """Host, pid and a random suffix: unique per process start, readable in the table."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Lease:
    """A time-bounded exclusive lease (``duration_s``) that its holder renews periodically.

    ``held`` turns false locally a safety margin before the stored expiry, so a holder whose
    renewals fail (network) stops reading before a standby may legitimately take over.
    """

    def __init__(
        self,
        client: Any,
        state_table: str,
        name: str,
        owner: str | None = None,
        duration_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = state_table
        self._key = {"PK": {"S": f"LEASE#{name}"}, "SK": {"S": "LEASE"}}
        self.owner = owner or new_owner_id()
        self.duration_s = duration_s
        self._clock = clock
        self._valid_until = 0.0
        self.generation = 0  # bumped on every fresh acquisition: the reader reloads its state

    @property
    def held(self) -> bool:
        return self._clock() < self._valid_until

    def acquire_or_renew(self) -> bool:
        """Take the lease if free, expired or already ours; True while we hold it."""
        was_held = self.held
        now = self._clock()
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    **self._key,
                    "owner": {"S": self.owner},
                    "expires": {"N": f"{now + self.duration_s:.3f}"},
                },
                ConditionExpression="attribute_not_exists(PK) OR #o = :me OR #e < :now",
                ExpressionAttributeNames={"#o": "owner", "#e": "expires"},
                ExpressionAttributeValues={
                    ":me": {"S": self.owner},
                    ":now": {"N": f"{now:.3f}"},
                },
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            if was_held:
                log.warning("lease %s lost to another reader", self._key["PK"]["S"])
            self._valid_until = 0.0
            return False
        if not was_held:
            self.generation += 1
            log.info("lease %s acquired by %s", self._key["PK"]["S"], self.owner)
        self._valid_until = now + self.duration_s * 0.8
        return True

    def release(self) -> None:
        """Give the lease up at once (clean stop), so a standby need not wait for expiry."""
        self._valid_until = 0.0
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=self._key,
                ConditionExpression="#o = :me",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":me": {"S": self.owner}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def current_owner(self) -> str | None:
        """Who holds the stored lease item (expired or not); for status and tests."""
        item = self._client.get_item(TableName=self._table, Key=self._key, ConsistentRead=True)
        owner = item.get("Item", {}).get("owner", {}).get("S")
        return str(owner) if owner else None


class MarkStore:
    """Marks under one partition of the sidecar's state table (consistent reads): what a
    backfill has finished (data files, scan segments), so a restart skips it."""

    def __init__(self, ddb: Any, table: str, pk: str) -> None:
        self._ddb, self._table, self._pk = ddb, table, pk

    def load(self) -> dict[str, dict[str, Any]]:
        rows = items(
            self._ddb,
            "query",
            TableName=self._table,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={":pk": {"S": self._pk}},
            ConsistentRead=True,
        )
        return {item["SK"]["S"]: item for item in rows}

    def put(self, sk: str, attrs: dict[str, Any]) -> None:
        item = {"PK": {"S": self._pk}, "SK": {"S": sk}, "at": {"N": str(int(time.time()))}}
        self._ddb.put_item(TableName=self._table, Item={**item, **attrs})

    def clear(self) -> None:
        for sk in self.load():
            key = {"PK": {"S": self._pk}, "SK": {"S": sk}}
            self._ddb.delete_item(TableName=self._table, Key=key)
