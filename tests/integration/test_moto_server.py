"""The stack's moto launcher: a partition Query returns what DynamoDB would, at partition cost.

Runs against the stack's moto server (``sidecar_tools.stack.moto_server``), the one every other
test uses; stock moto walks and sorts the whole table for each base-table Query.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def _table(ddb: Any, name: str) -> None:
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"},
                              {"AttributeName": "SK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"},
                   {"AttributeName": "SK", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
    )


def _fill(ddb: Any, name: str, partitions: int, per_partition: int) -> None:
    rows = [{"PutRequest": {"Item": {"PK": {"S": f"P{p:05d}"}, "SK": {"S": f"S{s:04d}"},
                                     "n": {"N": str(s)}}}}
            for p in range(partitions) for s in range(per_partition)]
    for start in range(0, len(rows), 25):
        ddb.batch_write_item(RequestItems={name: rows[start:start + 25]})


def _query_all(ddb: Any, name: str, **extra: Any) -> list[str]:
    args: dict[str, Any] = {
        "TableName": name, "KeyConditionExpression": "PK = :pk AND SK >= :lo",
        "ExpressionAttributeValues": {":pk": {"S": "P00007"}, ":lo": {"S": "S0003"}}, **extra,
    }
    found: list[str] = []
    while True:
        page = ddb.query(**args)
        found += [item["SK"]["S"] for item in page["Items"]]
        if "LastEvaluatedKey" not in page:
            return found
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _median_query_s(ddb: Any, name: str) -> float:
    times = []
    for _ in range(9):
        start = time.perf_counter()
        _query_all(ddb, name)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def test_partition_query_pages_and_orders_like_dynamodb(ddb: Any, unique: str) -> None:
    name = f"q-{unique}"
    _table(ddb, name)
    _fill(ddb, name, partitions=12, per_partition=10)
    assert _query_all(ddb, name) == [f"S{s:04d}" for s in range(3, 10)]
    assert _query_all(ddb, name, Limit=2) == [f"S{s:04d}" for s in range(3, 10)]
    assert _query_all(ddb, name, ScanIndexForward=False, Limit=3) == [
        f"S{s:04d}" for s in range(9, 2, -1)]
    missing = ddb.query(TableName=name, KeyConditionExpression="PK = :pk",
                        ExpressionAttributeValues={":pk": {"S": "nope"}})
    assert missing["Items"] == [] and missing["Count"] == 0
    scanned = ddb.scan(TableName=name, Select="COUNT")
    assert scanned["Count"] == 120, "a Query must not create or hide partitions"


def test_partition_query_cost_does_not_grow_with_the_table(ddb: Any, unique: str) -> None:
    small, big = f"qs-{unique}", f"qb-{unique}"
    for name in (small, big):
        _table(ddb, name)
    _fill(ddb, small, partitions=10, per_partition=10)
    _fill(ddb, big, partitions=400, per_partition=10)
    small_s, big_s = _median_query_s(ddb, small), _median_query_s(ddb, big)
    # Stock moto: the 4,000-item table costs ~40x the 100-item one per Query.
    assert big_s < 3 * small_s + 0.005, (small_s, big_s)


def _scan_all(ddb: Any, name: str, **extra: Any) -> list[tuple[str, str]]:
    args: dict[str, Any] = {"TableName": name, **extra}
    found: list[tuple[str, str]] = []
    while True:
        page = ddb.scan(**args)
        found += [(item["PK"]["S"], item["SK"]["S"]) for item in page["Items"]]
        if "LastEvaluatedKey" not in page:
            return found
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_paged_scan_returns_every_item_once_in_key_order(ddb: Any, unique: str) -> None:
    name = f"s-{unique}"
    _table(ddb, name)
    _fill(ddb, name, partitions=12, per_partition=10)
    every = sorted((f"P{p:05d}", f"S{s:04d}") for p in range(12) for s in range(10))
    assert _scan_all(ddb, name, Limit=7) == every
    assert _scan_all(ddb, name) == every
    segments = [_scan_all(ddb, name, Limit=5, Segment=n, TotalSegments=3) for n in range(3)]
    assert sorted(row for seg in segments for row in seg) == every
    assert all(segments)  # every segment got a share
    odd = _scan_all(ddb, name, Limit=4, FilterExpression="n > :five",
                    ExpressionAttributeValues={":five": {"N": "5"}})
    assert odd == [row for row in every if int(row[1][1:]) > 5]


def test_direct_json_answers_equal_motos_serializer() -> None:
    """The launcher's direct JSON for data-plane answers is what moto's serializer writes."""
    from moto.core.responses import ActionContext
    from moto.core.serialize import get_serializer_class
    from moto.core.utils import get_service_model
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.responses import DynamoResult

    from sidecar_tools.stack import moto_server

    stock = DynamoResult.execute_result
    moto_server._patch_responses()
    direct = DynamoResult.execute_result
    assert direct is not stock
    item = {
        "PK": DynamoType({"S": "a#é"}), "b": DynamoType({"B": "AAEC"}),
        "bs": DynamoType({"BS": ["AAE=", "AAI="]}), "n": DynamoType({"N": "1.5"}),
        "m": DynamoType({"M": {"x": {"S": "y"}, "l": {"L": [{"N": "1"}, {"NULL": True}]}}}),
        "t": DynamoType({"BOOL": False}), "ss": DynamoType({"SS": ["q", "p"]}),
    }
    answers = {
        "Query": {"Items": [item], "Count": 1, "ScannedCount": 1,
                  "LastEvaluatedKey": {"PK": {"S": "a"}}, "ConsumedCapacity": None},
        "BatchGetItem": {"Responses": {"t": [item]}, "UnprocessedKeys": {},
                         "ConsumedCapacity": [{"CapacityUnits": 1, "TableName": "t"}]},
        "GetItem": {"Item": item},
        "UpdateItem": {"Attributes": item},
    }
    model = get_service_model("dynamodb")
    try:
        for operation, answer in answers.items():
            context = ActionContext(model, model.operation_model(operation),
                                    get_serializer_class("dynamodb", "json"), None)
            want = stock(DynamoResult(answer), context)
            got = direct(DynamoResult(answer), context)
            assert got[0] == want[0] == 200
            assert json.loads(got[2]) == json.loads(want[2]), operation
    finally:
        DynamoResult.execute_result = stock  # type: ignore[method-assign]


def test_the_launcher_quiets_the_garbage_collector() -> None:
    """The launcher's collector settings (the full collections that paused every request for
    up to 182 ms are rare): thresholds raised, start-up's objects frozen out of it."""
    import gc

    from sidecar_tools.stack.moto_server import GC_THRESHOLDS, quiet_gc

    before = gc.get_threshold()
    try:
        quiet_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_freeze_count() > 0
        assert GC_THRESHOLDS[0] > before[0]
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


UPDATES = [
    "SET #a0 = :v0", "SET #a0 = :v0, #a1 = :v1 REMOVE #a2", "REMOVE #a0, #a1",
    "SET #a0 = :v0 SET #a1 = :v1", "REMOVE #a0 REMOVE #a1", "ADD #a0 :v0 ADD #a1 :v1",
    "SET #a0 = list_append(#a0, :v0) REMOVE #a1 ADD #a2 :v2",
    "SET #a0 = if_not_exists(#a0, :v0) + :v1 SET #a1 = :v2",
    "SET " + ", ".join(f"#a{n} = :v{n}" for n in range(80)) + " REMOVE #b0, #b1",
]


def _clause_check(expression: str) -> str | None:
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.dynamodb.parsing.validators import ActionCountValidator

    try:
        ActionCountValidator().traverse(UpdateExpressionParser.make(expression))
    except Exception as exc:  # moto's TooManyClauses: its type and words are the answer
        return f"{type(exc).__name__}: {exc}"
    return None


def test_the_one_pass_update_check_answers_as_motos() -> None:
    """The launcher's clause count (linear) refuses exactly what moto's (quadratic) refuses,
    with the same error."""
    from moto.dynamodb.parsing.validators import ActionCountValidator

    from sidecar_tools.stack import moto_server

    stock = ActionCountValidator.traverse
    want = [_clause_check(e) for e in UPDATES]
    moto_server._patch_update_checks()
    try:
        assert ActionCountValidator.traverse is not stock
        assert [_clause_check(e) for e in UPDATES] == want
        assert sum(w is not None for w in want) == 4  # the three doubled kinds and SET twice
    finally:
        ActionCountValidator.traverse = stock  # type: ignore[method-assign]


def test_a_wide_update_applies_and_a_doubled_clause_is_refused(ddb: Any, unique: str) -> None:
    """Through the stack's server: a participant-sized SET + REMOVE applies; two SET clauses
    are a ValidationException, as DynamoDB answers."""
    name = f"{unique}-updates"
    _table(ddb, name)
    key = {"PK": {"S": "m"}, "SK": {"S": "P"}}
    names = {f"#a{n}": f"p_{n}@example.org" for n in range(60)}
    values = {f":v{n}": {"S": f"cc {n}"} for n in range(59)}
    sets = ", ".join(f"#a{n} = :v{n}" for n in range(59))
    ddb.put_item(TableName=name, Item={**key, "p_59@example.org": {"S": "gone"}})
    ddb.update_item(TableName=name, Key=key, UpdateExpression=f"SET {sets} REMOVE #a59",
                    ExpressionAttributeNames=names, ExpressionAttributeValues=values)
    item = ddb.get_item(TableName=name, Key=key, ConsistentRead=True)["Item"]
    assert {k: v["S"] for k, v in item.items() if k.startswith("p_")} == {
        f"p_{n}@example.org": f"cc {n}" for n in range(59)}
    with pytest.raises(ddb.exceptions.ClientError, match="ValidationException"):
        ddb.update_item(TableName=name, Key=key, UpdateExpression="SET #a0 = :v0 SET #a1 = :v1",
                        ExpressionAttributeNames={"#a0": "x", "#a1": "y"},
                        ExpressionAttributeValues={":v0": {"S": "1"}, ":v1": {"S": "2"}})
