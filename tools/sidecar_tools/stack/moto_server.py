"""Run moto's server with fixes: cheap transaction snapshots, partition Queries, update checks.

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

Two per-request costs dominate once those are gone (py-spy on a backfill: ~50% of the server's
time in moto's model-driven response serializer, ~16% finding the backend for the request's
host). The third fix writes the JSON of DynamoDB's data-plane answers (items, keys, counts:
plain JSON with base64 binaries, exactly what the serializer emits for them) directly, and
remembers the host → backend answer, which never changes in a running server.

Last, Python's cyclic garbage collector: with its default thresholds the server ran a full
(oldest-generation) collection every ~7 s of a 5 messages/s stream, each pausing every request
for 46–182 ms and growing with the items held (126,000 → 372,000 objects in 100 s); requests
queued behind the pauses, and the store writer itself fell up to 1.7 s behind its schedule
(p99). The launcher freezes what start-up allocated and raises the thresholds
(:data:`GC_THRESHOLDS`): in the same measurement only young collections of ≤ 27 ms ran, and
the writer's lateness p99 fell to 11–16 ms (docs/results/runs/2026-12-05-freshness-moto-gc.md).
DynamoDB has no such pauses; the emulator should not add them to what the benches measure.

And ``UpdateItem``: before applying one, moto checks that the expression has at most one
``SET``, ``REMOVE`` and ``ADD`` clause by collecting, at *every* node of the parsed expression,
the clauses of the subtree below it: quadratic in the expression's actions (a participant
item's ``SET`` of 60 addresses took 40 ms, a quarter of the server's time under the freshness
bench in py-spy). The launcher counts them in one post-order pass instead
(:func:`_patch_update_checks`): the same error, raised at the same node, at linear cost.
"""

from __future__ import annotations

import base64
import bisect
import copy
import gc
import json
import sys
import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

Snapshot = tuple[list[tuple[Any, Any, Any]], dict[str, int]]
# young collections every 50,000 net allocations; a full one after 20 x 100 of those: cycles
# among young objects (a request's) are still collected at once, the long-lived items rarely
GC_THRESHOLDS = (50_000, 20, 100)


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


# Operations whose answers hold only items, keys, counts and capacity: no timestamps, no
# shapes whose wire names differ from moto's dict keys.
DATA_PLANE = frozenset({
    "GetItem", "BatchGetItem", "Query", "Scan", "PutItem", "UpdateItem", "DeleteItem",
    "BatchWriteItem", "TransactGetItems", "TransactWriteItems",
})


def _plain(value: Any) -> Any:
    """moto's result dict → JSON values: bytes base64, ``None`` members left out (as the
    serializer does)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, set):
        return [_plain(v) for v in sorted(value)]
    if isinstance(value, datetime):
        return value.timestamp()
    return value


def _patch_responses() -> None:
    """Direct JSON for data-plane answers; a memo of the host → backend lookup."""
    from moto.dynamodb.responses import DynamoResult
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    serialize: Callable[..., Any] = DynamoResult.execute_result

    def execute_result(self: Any, context: Any) -> Any:
        if context.operation_model.name not in DATA_PLANE:
            return serialize(self, context)
        body = json.dumps(_plain(self.result), separators=(",", ":"))
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, body

    lookup: Callable[[Any, str | None], Any] = DomainDispatcherApplication.get_backend_for_host
    memo: dict[str | None, Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host not in memo:
            found = lookup(self, host)
            if found is None:
                return None  # not remembered: the caller tries other hints
            memo[host] = found
        return memo[host]

    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]
    DomainDispatcherApplication.get_backend_for_host = (  # type: ignore[method-assign]
        get_backend_for_host
    )


def _patch_update_checks() -> None:
    """moto's one-clause-per-kind check of an update expression, in one pass (see above)."""
    from moto.dynamodb.exceptions import TooManyClauses
    from moto.dynamodb.parsing import ast_nodes
    from moto.dynamodb.parsing.validators import ActionCountValidator

    ast: Any = ast_nodes  # moto types this module as ignored: its names are unknown to mypy

    kinds = {ast.UpdateExpressionAddClause: "ADD", ast.UpdateExpressionRemoveClause: "REMOVE",
             ast.UpdateExpressionSetClause: "SET"}  # in the order moto checks them
    descended = (ast.Expression, ast.UpdateExpressionFunction)

    def counted(node: Any) -> Counter[str]:
        """What ``node.find_clauses`` would find of each kind, after checking each node below
        (children first, as moto's traverser visits them)."""
        found: Counter[str] = Counter()
        for child in node.children or []:
            if not isinstance(child, ast.Node):
                continue
            below = counted(child)
            if type(child) in kinds:
                found[kinds[type(child)]] += 1
            elif isinstance(child, descended):
                found.update(below)
        if isinstance(node, ast.UpdateExpression):
            for name in kinds.values():
                if found[name] > 1:
                    raise TooManyClauses(name)
        return found

    def traverse(self: Any, node: Any) -> Any:
        if isinstance(node, ast.Node):
            counted(node)
        return node

    ActionCountValidator.traverse = traverse


def patch() -> None:
    """Install the cheap snapshot, the cheap reads, the direct responses, the update checks."""
    _patch_reads()
    _patch_responses()
    _patch_update_checks()
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


def quiet_gc() -> None:
    """Freeze start-up's objects out of the collector and raise its thresholds (see above)."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def main() -> None:
    patch()
    quiet_gc()
    from moto.server import main as moto_main

    moto_main(sys.argv[1:])


if __name__ == "__main__":
    main()
