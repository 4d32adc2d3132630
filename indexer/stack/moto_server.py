"""Run moto's server with two fixes: cheap ``TransactWriteItems`` snapshots, partition Queries.

moto 5.2.5 deep-copies the *whole table* (items and stream records) once per operation of
every transaction, to roll back on failure. With the writer's ~30-operation transactions that
makes loading grow quadratically in time, and the copies (cyclic through the stream shard)
pile up: loading 176 messages took the server to ~8 GB. This launcher snapshots only the items
a transaction touches plus the stream's length, and restores exactly those on failure —
the same observable behaviour (all-or-nothing items, no stream records for a cancelled
transaction) at O(transaction) cost.

moto also answers a base-table ``Query`` by sorting and walking *every* item of the table
(~3 s per Query at 86k items), though the key condition names one partition. The second fix
hands that code only the named partition's items: same results, O(partition) cost. Index
(GSI) queries and everything else are moto as shipped.
"""

from __future__ import annotations

import copy
import sys
import threading
from collections.abc import Callable
from typing import Any

Snapshot = tuple[list[tuple[Any, Any, Any]], dict[str, int]]


def _key_of(table: Any, op_type: str, op: dict[str, Any]) -> dict[str, Any] | None:
    if op_type != "Put":
        key = op.get("Key")
        return key if isinstance(key, dict) else None
    attrs = op.get("Item", {})
    names = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
    return {n: attrs[n] for n in names} if all(n in attrs for n in names) else None


def _snapshot(backend: Any, transact_items: list[dict[str, Any]]) -> Snapshot:
    touched: list[tuple[Any, Any, Any]] = []
    streams: dict[str, int] = {}
    for entry in transact_items:
        op_type, op = next(iter(entry.items()))
        table = backend.tables.get(op.get("TableName")) if isinstance(op, dict) else None
        if table is None:
            continue
        if table.stream_shard is not None:
            streams.setdefault(table.name, len(table.stream_shard.items))
        key = _key_of(table, op_type, op)
        if key is None:
            continue
        try:
            current = backend.get_item(table.name, key)
        except Exception:  # noqa: S112 - an invalid key fails the transaction itself
            continue
        touched.append((table, key, copy.deepcopy(current)))
    return touched, streams


def _restore(backend: Any, snapshot: Snapshot) -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    touched, streams = snapshot
    for table, key, item in reversed(touched):
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        if item is not None:
            if range_value is not None:
                table.items[hash_value][range_value] = item
            else:
                table.items[hash_value] = item
        elif range_value is not None:
            table.items.get(hash_value, {}).pop(range_value, None)
        else:
            table.items.pop(hash_value, None)
    for name, length in streams.items():
        shard = backend.tables[name].stream_shard
        if shard is not None:
            del shard.items[length:]


_partition = threading.local()


def _patch_query() -> None:
    """Let a base-table Query see only its partition (moto's server answers on threads)."""
    from moto.dynamodb.models.table import Table

    all_items: Callable[[Any], list[Any]] = Table.all_items
    query: Callable[..., Any] = Table.query

    def partition_items(self: Any) -> list[Any]:
        hash_key = getattr(_partition, "key", None)
        if hash_key is None or not self.range_key_attr:
            return all_items(self)
        rows = self.items.get(hash_key)  # .get: items is a defaultdict
        return sorted(rows.values(), key=lambda item: item.range_key) if rows else []

    def partition_query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        _partition.key = None if index_name else hash_key
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            _partition.key = None

    Table.all_items = partition_items  # type: ignore[method-assign]
    Table.query = partition_query  # type: ignore[method-assign]


def patch() -> None:
    """Install the cheap snapshot and the partition-only Query."""
    _patch_query()
    import moto.dynamodb.models as models
    from moto.dynamodb.models.table import Table

    class _NoTableCopy:
        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    models.copy = _NoTableCopy  # type: ignore[attr-defined,assignment]
    original: Callable[[Any, list[dict[str, Any]]], None]
    original = models.DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        snapshot = _snapshot(self, transact_items)
        try:
            original(self, transact_items)
        except Exception:
            _restore(self, snapshot)
            raise

    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def main() -> None:
    patch()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
