"""Count the AWS requests of botocore clients and the DynamoDB request units they cost.

Why computed here: moto's ``ConsumedCapacity`` is a placeholder, so the units are computed
from item sizes the way DynamoDB bills on-demand tables (AWS's "Read/write capacity mode"
page): a strongly consistent read is one unit per 4 KB of each item (rounded up per item for
GetItem/BatchGetItem, over the page's total for Query/Scan), an eventually consistent read half
of that, a write one unit per 1 KB of the item (twice that inside a transaction). An item's
size is the UTF-8 length of its attribute names plus the size of each value, as AWS's
"Item sizes and formats" page gives it.

A ``before-parameter-build`` hook keeps each call's parameters, an ``after-call`` hook adds its
units from the parsed response; writes are billed on the item as sent (``PutItem``) or, when
the meter has a ``sizer`` (an unmetered client reading the item afterwards), as stored.

OpenSearch requests are counted too (:meth:`Meter.attach_opensearch`): each HTTP request an
opensearch-py client's connections send, as ``opensearch:<METHOD> <endpoint>``.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

READ_UNIT = 4096  # bytes per strongly consistent read unit
WRITE_UNIT = 1024  # bytes per write unit
_READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one DynamoDB JSON value (``{"S": ...}``, ``{"N": ...}``, ``{"M": ...}``...)."""
    (kind, inner), = value.items()
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        digits = str(inner).lstrip("-").replace(".", "").lstrip("0") or "0"
        return math.ceil(len(digits) / 2) + 1
    if kind == "B":
        return len(inner)
    if kind in ("NULL", "BOOL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: v}) for v in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in inner.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: Mapping[str, Any]) -> int:
    """Bytes of one item in DynamoDB JSON: names plus values."""
    return sum(len(name.encode()) + value_size(v) for name, v in item.items())


def read_units(size: int, *, consistent: bool) -> float:
    """Read units of ``size`` bytes read at once (at least one unit, or half)."""
    units = max(1, math.ceil(size / READ_UNIT))
    return float(units) if consistent else units / 2


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT))


@dataclass
class Counts:
    """Requests by ``service:operation`` and DynamoDB units, of one measured path."""

    requests: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0

    def dynamodb_requests(self, reads_only: bool = False) -> int:
        return sum(n for op, n in self.requests.items() if op.startswith("dynamodb:")
                   and (not reads_only or op.split(":", 1)[1] in _READS))

    def of(self, service: str) -> Counter[str]:
        """This service's requests by operation (``service:`` left off)."""
        return Counter({op.split(":", 1)[1]: n for op, n in self.requests.items()
                        if op.split(":", 1)[0] == service})


def opensearch_endpoint(url: str) -> str:
    """What an OpenSearch request is, from its path: its first ``_`` segment (``_bulk``,
    ``_alias``, ``_doc``...), else ``<index>`` (an index's own create, exists, delete)."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    return next((p for p in parts if p.startswith("_")), "<index>" if parts else "/")


Sizer = Callable[[str, Mapping[str, Any]], int | None]  # (table, key) -> stored item size


class Meter:
    """Counts every call of the clients it is attached to, while ``active``."""

    def __init__(self, sizer: Sizer | None = None) -> None:
        self.counts = Counts()
        self.active = True
        self._sizer = sizer
        self._lock = threading.Lock()

    def reset(self) -> Counts:
        """The counts so far; counting starts again from zero."""
        with self._lock:
            done, self.counts = self.counts, Counts()
        return done

    def attach(self, client: Any) -> Any:
        service = client.meta.service_model.service_name
        events = client.meta.events

        def before(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["meter_params"] = params

        def after(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            if self.active:
                self._count(service, str(model.name), context.get("meter_params", {}), parsed)

        events.register("before-parameter-build.*.*", before)
        events.register("after-call.*.*", after)
        return client

    def attach_opensearch(self, client: Any) -> Any:
        """Count every HTTP request of an opensearch-py client, per connection attempt (a
        request the transport retries on another node counts twice), while ``active``."""
        for connection in client.transport.connection_pool.connections:
            inner = connection.perform_request

            def perform(method: str, url: str, *args: Any, _inner: Any = inner,
                        **kwargs: Any) -> Any:
                if self.active:
                    with self._lock:
                        self.counts.requests[f"opensearch:{method} {opensearch_endpoint(url)}"] += 1
                return _inner(method, url, *args, **kwargs)

            connection.perform_request = perform
        return client

    def _count(self, service: str, op: str, params: dict[str, Any], parsed: dict[str, Any]) -> None:
        reads, writes = 0.0, 0.0
        if service == "dynamodb":
            reads, writes = self._units(op, params, parsed)
        with self._lock:
            self.counts.requests[f"{service}:{op}"] += 1
            self.counts.read_units += reads
            self.counts.write_units += writes

    def _units(
        self, op: str, params: dict[str, Any], parsed: dict[str, Any]
    ) -> tuple[float, float]:
        if op == "GetItem" and "Item" in parsed:
            return read_units(item_size(parsed["Item"]),
                              consistent=bool(params.get("ConsistentRead"))), 0.0
        if op == "BatchGetItem":
            total = 0.0
            for table, found in parsed.get("Responses", {}).items():
                strong = bool(params.get("RequestItems", {}).get(table, {}).get("ConsistentRead"))
                total += sum(read_units(item_size(i), consistent=strong) for i in found)
            return total, 0.0
        if op in ("Query", "Scan"):
            table = str(params.get("TableName", ""))
            size = sum(self._stored(table, i) for i in parsed.get("Items", []))
            return read_units(size, consistent=bool(params.get("ConsistentRead"))), 0.0
        if op == "PutItem":
            return 0.0, float(write_units(item_size(params.get("Item", {}))))
        if op in ("UpdateItem", "DeleteItem"):
            stored = self._sizer(params["TableName"], params["Key"]) if self._sizer else None
            return 0.0, float(write_units(stored or item_size(params.get("Key", {}))))
        if op == "BatchWriteItem":
            return 0.0, float(sum(
                write_units(item_size(r.get("PutRequest", {}).get("Item")
                                      or r.get("DeleteRequest", {}).get("Key", {})))
                for rows in params.get("RequestItems", {}).values() for r in rows))
        return 0.0, 0.0

    def _stored(self, table: str, item: Mapping[str, Any]) -> int:
        """A Query/Scan bills the whole item, projected or not: its stored size if known."""
        if self._sizer is not None and "PK" in item and "SK" in item:
            found = self._sizer(table, {"PK": item["PK"], "SK": item["SK"]})
            if found is not None:
                return found
        return item_size(item)
