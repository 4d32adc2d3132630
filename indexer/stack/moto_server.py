"""Run moto's server with two fixes: cheap ``TransactWriteItems`` snapshots, partition Queries.

moto 5.2.5 deep-copies the *whole table* (items and stream records) once per operation of
every transaction, to roll back on failure. With the writer's ~30-operation transactions that
makes loading grow quadratically in time, and the copies (cyclic through the stream shard)
pile up: loading 176 messages took the server to ~8 GB. This launcher snapshots only the items
a transaction touches plus the stream's length, and restores exactly those on failure —
the same observable behaviour (all-or-nothing items, no stream records for a cancelled
transaction) at O(transaction) cost.

moto also answers a base-table ``Query`` by sorting and walking *every* item of the table
(~3 s per Query at 86k items), though the key condition names one partition, and each Scan
page by sorting the table and walking it up to the page's start key. The second fix hands
that code only the named partition's items, or the rows after the start key: same results,
O(partition) per Query and O(n log n) with cheap comparisons per Scan page. Index (GSI)
reads and everything else are moto as shipped.
"""

from __future__ import annotations

import bisect
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


_hint = threading.local()  # per request: moto's server answers on threads


def _fast_key(item: Any) -> tuple[Any, Any]:
    """moto's (hash, range) order, compared on plain Python values instead of DynamoTypes."""
    return item.hash_key.cast_value, item.range_key.cast_value


def _rows_after(table: Any, start: dict[str, Any] | None) -> list[Any]:
    """Every item in moto's Scan order, beginning after ``start`` (a LastEvaluatedKey)."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    rows = sorted((i for part in table.items.values() for i in part.values()), key=_fast_key)
    if not start:
        return rows
    after = (DynamoType(start[table.hash_key_attr]).cast_value,
             DynamoType(start[table.range_key_attr]).cast_value)
    return rows[bisect.bisect_right(rows, after, key=_fast_key):]


def _patch_reads() -> None:
    """Base-table Query: only the named partition. Base-table Scan: start at the page's key.

    moto sorts every item with DynamoType comparisons, then walks from the first item to the
    page's start key, for each page; both hooks hand its code just the rows it would keep.
    """
    from moto.dynamodb.models.table import Table

    all_items: Callable[[Any], list[Any]] = Table.all_items
    query: Callable[..., Any] = Table.query
    scan: Callable[..., Any] = Table.scan

    def hinted_items(self: Any) -> list[Any]:
        mode = getattr(_hint, "mode", None)
        if mode is None or not self.range_key_attr:
            return all_items(self)
        if mode == "scan":
            return _rows_after(self, _hint.value)
        rows = self.items.get(_hint.value)  # .get: items is a defaultdict
        return sorted(rows.values(), key=lambda item: item.range_key) if rows else []

    def hinted(call: Callable[..., Any], mode: str, value: Any, index_name: Any) -> Callable[
            ..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            _hint.mode, _hint.value = (None, None) if index_name else (mode, value)
            try:
                return call(*args, **kwargs)
            finally:
                _hint.mode = _hint.value = None

        return run

    def partition_query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        return hinted(query, "query", hash_key, index_name)(self, hash_key, *args, **kwargs)

    def keyed_scan(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = kwargs.get("exclusive_start_key", args[2] if len(args) > 2 else None)
        index_name = kwargs.get("index_name", args[4] if len(args) > 4 else None)
        return hinted(scan, "scan", start, index_name)(self, *args, **kwargs)

    Table.all_items = hinted_items  # type: ignore[method-assign]
    Table.query = partition_query  # type: ignore[method-assign]
    Table.scan = keyed_scan  # type: ignore[method-assign]


def patch() -> None:
    """Install the cheap snapshot and the cheap reads."""
    _patch_reads()
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
