"""DynamoDB Streams: the calls the tailer makes, and an exporter of a table's stream records
to a file (tests, the bench).

``get_records`` returns ``ApproximateCreationDateTime`` as a datetime; exported records carry
epoch seconds, as Lambda event batches do, so every reader sees one shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any


def latest_stream_arn(dynamodb: Any, table: str) -> str:
    arn = dynamodb.describe_table(TableName=table)["Table"].get("LatestStreamArn")
    if not arn:
        raise ValueError(f"table {table!r} has no stream enabled")
    return str(arn)


def list_shards(streams: Any, arn: str) -> list[dict[str, Any]]:
    """Every shard of the stream, following ``LastEvaluatedShardId`` paging."""
    shards: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"StreamArn": arn}
    while True:
        desc = streams.describe_stream(**kwargs)["StreamDescription"]
        shards.extend(desc.get("Shards", []))
        last = desc.get("LastEvaluatedShardId")
        if not last:
            return shards
        kwargs["ExclusiveStartShardId"] = last


class StreamReader:
    """The tailer's door to a ``dynamodbstreams`` client (boto3's, or a test's stand-in with
    the same three methods): shard listing, iterators and record pages."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def shards(self, arn: str) -> list[dict[str, Any]]:
        return list_shards(self._client, arn)

    def iterator(self, arn: str, shard_id: str, kind: str, sequence: str | None) -> str | None:
        """A shard iterator of ``kind`` (``AFTER_SEQUENCE_NUMBER`` needs ``sequence``)."""
        args: dict[str, Any] = {"StreamArn": arn, "ShardId": shard_id, "ShardIteratorType": kind}
        if sequence is not None:
            args["SequenceNumber"] = sequence
        found = self._client.get_shard_iterator(**args).get("ShardIterator")
        return str(found) if found else None

    def records(self, iterator: str, limit: int) -> tuple[list[dict[str, Any]], str | None]:
        """One page: its records and the next iterator (``None``: the shard is closed and read)."""
        response = self._client.get_records(ShardIterator=iterator, Limit=limit)
        return list(response.get("Records", [])), response.get("NextShardIterator")


def portable(record: dict[str, Any]) -> dict[str, Any]:
    """A get_records record in the exported shape (epoch-second creation time)."""
    ddb = dict(record["dynamodb"])
    created = ddb.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        ddb["ApproximateCreationDateTime"] = int(created.timestamp())
    out = {k: v for k, v in record.items() if k != "dynamodb"}
    out["dynamodb"] = ddb
    return out


def iter_stream_records(streams: Any, arn: str) -> Iterator[dict[str, Any]]:
    """Every record currently in the stream, parents' shards before children's."""
    shards = list_shards(streams, arn)
    known = {s["ShardId"] for s in shards}
    ordered = [s for s in shards if s.get("ParentShardId") not in known]
    ordered += [s for s in shards if s.get("ParentShardId") in known]
    for shard in ordered:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        ).get("ShardIterator")
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records = page.get("Records", [])
            for record in records:
                yield portable(record)
            if not records:
                break
            iterator = page.get("NextShardIterator")


def export_records(dynamodb: Any, streams: Any, table: str, out: Path) -> int:
    """Write the table's stream records as JSON lines; returns how many."""
    count = 0
    with out.open("w", encoding="utf-8") as fh:
        for record in iter_stream_records(streams, latest_stream_arn(dynamodb, table)):
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count
