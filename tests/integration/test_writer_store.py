"""The test writer against the stack's moto server: items, indexes, stream records, idempotency.

The notmuch-lkml corpus is loaded once per mode (atomic, bulk) for the read-only checks; tests
that change data use two of its threads in a table of their own.
"""

from __future__ import annotations

import gzip
import json
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from indexer.adapters.aws.clients import client
from indexer.settings import Settings
from sidecar_tools.writer.files import LoadSummary, Rejected, load_file, rewrite_file
from sidecar_tools.writer.mapping import sha256_hex, to_items
from sidecar_tools.writer.store import create_table, delete_message, rewrite_message, store_message
from tests.conftest import CORPORA

pytestmark = pytest.mark.stack

LKML = CORPORA / "notmuch-lkml.jsonl.gz"
MAILBOX = "alice@example.com"
_DESER = TypeDeserializer()


def corpus() -> list[dict[str, Any]]:
    with gzip.open(LKML, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def scan(ddb: Any, table: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Every item of the table by (PK, SK), paged on LastEvaluatedKey."""
    items: dict[tuple[str, str], dict[str, Any]] = {}
    args: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = ddb.scan(**args)
        for raw in page["Items"]:
            item = {k: _DESER.deserialize(v) for k, v in raw.items()}
            items[(item["PK"], item["SK"])] = item
        if "LastEvaluatedKey" not in page:
            return items
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def kind(pk: str, sk: str) -> str:
    part = pk.split("#", 3)[2]
    if part == "T":
        return "thread" if sk == "THREAD" else "message"
    if part == "MSG":
        return {"BODY": "body", "META": "pointer"}[sk]
    return {"A": "participant", "R": "reference"}[part]


def stream_records(settings: Settings, ddb: Any, table: str) -> list[dict[str, Any]]:
    """All records of the table's stream: every shard from TRIM_HORIZON until it runs dry."""
    streams = client(settings, "dynamodbstreams")
    arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shards: list[dict[str, Any]] = []
    args: dict[str, Any] = {"StreamArn": arn}
    while True:
        desc = streams.describe_stream(**args)["StreamDescription"]
        shards.extend(desc["Shards"])
        if not desc.get("LastEvaluatedShardId"):
            break
        args["ExclusiveStartShardId"] = desc["LastEvaluatedShardId"]
    records: list[dict[str, Any]] = []
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            out = streams.get_records(ShardIterator=iterator, Limit=1000)
            records.extend(out["Records"])
            if not out["Records"]:
                break
            iterator = out.get("NextShardIterator")
    return records


def record_key(record: dict[str, Any]) -> tuple[str, str]:
    keys = record["dynamodb"]["Keys"]
    return keys["PK"]["S"], keys["SK"]["S"]


def write_lines(path: Path, emails: list[Any]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in emails), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Loaded:
    """A table loaded from ``path`` (``emails`` are its lines) and the load's summary."""

    settings: Settings
    ddb: Any
    path: Path
    emails: list[dict[str, Any]]
    atomic: bool
    summary: LoadSummary

    @property
    def table(self) -> str:
        return self.settings.table


@pytest.fixture(scope="module", params=["atomic", "bulk"])
def loaded(request: pytest.FixtureRequest) -> Iterator[Loaded]:
    """The whole corpus, stored one transaction per message, and in bulk mode.

    Needs the stack's moto launcher (``sidecar_tools.stack.moto_server``): stock moto 5.2.5 copies
    the whole table for every operation of a transaction, and the atomic load takes minutes.
    """
    atomic = request.param == "atomic"
    emails, path = corpus(), LKML
    settings = Settings(table=f"t-{uuid.uuid4().hex[:10]}")
    ddb = client(settings, "dynamodb")
    create_table(ddb, settings.table)
    summary = load_file(ddb, settings.table, path, MAILBOX, atomic=atomic)
    yield Loaded(settings, ddb, path, emails, atomic, summary)
    ddb.delete_table(TableName=settings.table)


@pytest.fixture
def table(settings: Settings, ddb: Any) -> Iterator[str]:
    create_table(ddb, settings.table)
    yield settings.table
    ddb.delete_table(TableName=settings.table)


@pytest.fixture(scope="module")
def slice_emails() -> list[dict[str, Any]]:
    """Two whole lkml threads: one of 3–6 messages (to delete from) and one other."""
    by_thread: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in corpus():
        by_thread[e["threadId"]].append(e)
    sizes = sorted(by_thread.values(), key=len)
    target = next(t for t in sizes if 3 <= len(t) <= 6)
    other = next(t for t in sizes if t is not target and len(t) >= 2)
    return target + other


def test_create_table_is_idempotent(settings: Settings, ddb: Any) -> None:
    assert create_table(ddb, settings.table) is True
    assert create_table(ddb, settings.table) is False
    desc = ddb.describe_table(TableName=settings.table)["Table"]
    assert desc["TableStatus"] == "ACTIVE"
    assert desc["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    gsis = {g["IndexName"]: g for g in desc["GlobalSecondaryIndexes"]}
    assert set(gsis) == {"GSI1", "GSI2"}
    assert all(g["Projection"]["ProjectionType"] == "ALL" for g in gsis.values())
    ddb.delete_table(TableName=settings.table)


def test_corpus_loads_every_message(loaded: Loaded) -> None:
    assert loaded.summary == LoadSummary(len(loaded.emails), 0, ())
    assert len(loaded.emails) == 176  # corpora/stats.txt


def test_item_counts_per_type(loaded: Loaded) -> None:
    counts = Counter(kind(pk, sk) for pk, sk in scan(loaded.ddb, loaded.table))
    expected = [to_items(e, MAILBOX) for e in loaded.emails]
    n = len(loaded.emails)
    assert counts == {
        "message": n, "body": n, "pointer": n,
        "thread": len({e["threadId"] for e in loaded.emails}),
        "participant": sum(len(i.participants) for i in expected),
        "reference": sum(len(i.references) for i in expected),
    }
    assert counts["thread"] == 33  # corpora/stats.txt


def test_inbox_is_newest_first_across_pages(loaded: Loaded) -> None:
    seen: list[tuple[int, str]] = []
    args: dict[str, Any] = {
        "TableName": loaded.table, "IndexName": "GSI1", "ScanIndexForward": False,
        "Limit": 10, "KeyConditionExpression": "GSI1PK = :m",
        "ExpressionAttributeValues": {":m": {"S": f"M#{MAILBOX}"}},
    }
    pages = 0
    while True:
        page = loaded.ddb.query(**args)
        pages += 1
        seen += [(int(i["ts"]["N"]), i["message_key"]["S"]) for i in page["Items"]]
        if "LastEvaluatedKey" not in page:
            break
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    assert pages >= 4
    expected = sorted(((e["metadata"]["timestamp"], sha256_hex(e["messageId"]))
                       for e in loaded.emails), reverse=True)
    assert seen == expected


def test_thread_summaries_match_their_messages(loaded: Loaded) -> None:
    items = scan(loaded.ddb, loaded.table)
    messages: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (pk, sk), item in items.items():
        if kind(pk, sk) == "message":
            messages[pk].append(item)
    threads = {pk: i for (pk, sk), i in items.items() if sk == "THREAD"}
    assert set(threads) == set(messages)
    for pk, summary in threads.items():
        msgs = sorted(messages[pk], key=lambda m: (m["ts"], m["message_key"]))
        assert summary["message_count"] == len(msgs)
        assert (summary["first_ts"], summary["last_ts"]) == (msgs[0]["ts"], msgs[-1]["ts"])
        assert summary["last_message_key"] == msgs[-1]["message_key"]
        assert summary["GSI2PK"] == f"M#{MAILBOX}#THREADS"
        assert summary["GSI2SK"] == f"{int(msgs[-1]['ts']):012d}#{pk.rsplit('#', 1)[1]}"
    by_id = Counter(e["threadId"] for e in loaded.emails)
    assert sorted(int(t["message_count"]) for t in threads.values()) == sorted(by_id.values())


def test_stream_has_one_insert_per_item(loaded: Loaded) -> None:
    records = stream_records(loaded.settings, loaded.ddb, loaded.table)
    inserts = Counter(record_key(r) for r in records if r["eventName"] == "INSERT")
    assert inserts == Counter(list(scan(loaded.ddb, loaded.table)))
    others = {kind(*record_key(r)) for r in records if r["eventName"] != "INSERT"}
    assert others <= {"thread"}  # a summary is inserted once, then modified per message


def test_loading_twice_changes_nothing(loaded: Loaded) -> None:
    before = scan(loaded.ddb, loaded.table)
    records = len(stream_records(loaded.settings, loaded.ddb, loaded.table))
    again = load_file(loaded.ddb, loaded.table, loaded.path, MAILBOX, atomic=loaded.atomic)
    assert again == LoadSummary(0, len(loaded.emails), ())
    assert scan(loaded.ddb, loaded.table) == before
    assert len(stream_records(loaded.settings, loaded.ddb, loaded.table)) == records


def test_delete_message_removes_its_items_and_fixes_the_thread(
    settings: Settings, ddb: Any, table: str, tmp_path: Path, slice_emails: list[dict[str, Any]]
) -> None:
    load_file(ddb, table, write_lines(tmp_path / "s.jsonl", slice_emails), MAILBOX)
    thread_id = slice_emails[0]["threadId"]
    mine = sorted((e for e in slice_emails if e["threadId"] == thread_id),
                  key=lambda e: (e["metadata"]["timestamp"], sha256_hex(e["messageId"])))
    before = scan(ddb, table)
    tpk = f"M#{MAILBOX}#T#{sha256_hex(thread_id)}"

    newest = mine[-1]
    assert delete_message(ddb, table, MAILBOX, newest["messageId"]) is True
    after = scan(ddb, table)
    gone = set(before) - set(after)
    expected = to_items(newest, MAILBOX)
    own = [expected.message, expected.body, expected.pointer, *expected.side_items]
    assert gone == {(i["PK"], i["SK"]) for i in own}
    summary = after[(tpk, "THREAD")]
    assert summary["message_count"] == len(mine) - 1
    runner_up = mine[-2]
    assert summary["last_ts"] == runner_up["metadata"]["timestamp"]
    assert summary["last_message_key"] == sha256_hex(runner_up["messageId"])
    assert delete_message(ddb, table, MAILBOX, newest["messageId"]) is False

    for n, e in enumerate(mine[:-1]):  # odd ones name their rows as a production writer would
        stored = to_items(e, MAILBOX) if n % 2 else None
        assert delete_message(ddb, table, MAILBOX, e["messageId"], stored) is True
    left = scan(ddb, table)
    assert not any(pk == tpk for pk, _ in left)
    assert all(sha256_hex(e["messageId"]) not in pk + sk for e in mine for pk, sk in left)
    others = {k: v for k, v in before.items() if k in left}
    assert left == others and len(left) > 0  # the other thread is untouched
    removes = [r for r in stream_records(settings, ddb, table)
               if r["eventName"] == "REMOVE"]
    assert {record_key(r) for r in removes} == set(before) - set(left)


def test_rewrite_message_shows_modify(
    settings: Settings, ddb: Any, table: str, tmp_path: Path, slice_emails: list[dict[str, Any]]
) -> None:
    path = write_lines(tmp_path / "s.jsonl", slice_emails[:2])
    load_file(ddb, table, path, MAILBOX)
    first = slice_emails[0]
    reparsed = {**first, "processing": {**first["processing"], "specVersion": "1.1"},
                "content": {**first["content"], "forAI": "re-parsed"}}
    items = to_items(reparsed, MAILBOX)
    assert rewrite_message(ddb, table, items) is True
    stored = scan(ddb, table)
    assert stored[(items.message["PK"], items.message["SK"])]["forai"] == "re-parsed"
    modify = {record_key(r): r for r in stream_records(settings, ddb, table)
              if r["eventName"] == "MODIFY" and kind(*record_key(r)) != "thread"}
    msg_key = (items.message["PK"], items.message["SK"])
    assert set(modify) == {msg_key, (items.body["PK"], "BODY")}
    image = modify[msg_key]["dynamodb"]
    assert image["OldImage"]["spec_version"] == {"S": "1.0"}
    assert image["NewImage"]["spec_version"] == {"S": "1.1"}

    unknown = to_items({**first, "messageId": "never-stored@example.com"}, MAILBOX)
    assert rewrite_message(ddb, table, unknown) is False
    assert scan(ddb, table) == stored
    summary = rewrite_file(ddb, table, path, MAILBOX, spec_version="2.0")
    assert (summary.stored, summary.already_present) == (2, 0)
    versions = {i["spec_version"] for (pk, sk), i in scan(ddb, table).items()
                if kind(pk, sk) == "message"}
    assert versions == {"2.0"}


def test_malformed_lines_are_reported_and_the_rest_load(
    ddb: Any, table: str, tmp_path: Path, slice_emails: list[dict[str, Any]]
) -> None:
    good = [json.dumps(e) for e in slice_emails[:3]]
    lines = [good[0], "{not json", "", json.dumps([1, 2]), good[1],
             json.dumps({"messageId": "x"}), good[2]]
    path = tmp_path / "mixed.jsonl.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    summary = load_file(ddb, table, path, MAILBOX)
    assert (summary.stored, summary.already_present) == (3, 0)
    assert [r.line for r in summary.rejected] == [2, 4, 6]
    assert "invalid JSON" in summary.rejected[0].reason
    assert "JSON object" in summary.rejected[1].reason
    assert "threadId" in summary.rejected[2].reason
    assert all(isinstance(r, Rejected) for r in summary.rejected)


def test_unreadable_files_raise(ddb: Any, table: str, tmp_path: Path) -> None:
    with pytest.raises(OSError, match="missing"):
        load_file(ddb, table, tmp_path / "missing.jsonl", MAILBOX)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"a": 1}\n' * 1000)[:60])
    with pytest.raises(OSError, match="unreadable"):
        load_file(ddb, table, cut, MAILBOX)


def test_more_than_100_items_are_all_written(ddb: Any, table: str) -> None:
    crowd = [{"email": f"user{i}@example.com"} for i in range(150)]
    email = {"messageId": "big@example.com", "threadId": "big@example.com",
             "metadata": {"timestamp": 1_600_000_000, "to": crowd, "subject": "All hands"}}
    items = to_items(email, MAILBOX)
    assert store_message(ddb, table, items) is True
    assert store_message(ddb, table, items) is False
    stored = scan(ddb, table)
    assert Counter(kind(*k) for k in stored) == {"message": 1, "body": 1, "pointer": 1,
                                                  "thread": 1, "participant": 150}
    thread = stored[(items.thread.pk, "THREAD")]
    assert thread["message_count"] == 1
    assert delete_message(ddb, table, MAILBOX, "big@example.com") is True
    assert scan(ddb, table) == {}


def test_rerunning_a_crashed_bulk_load_repairs_the_summaries(
    ddb: Any, table: str, tmp_path: Path, slice_emails: list[dict[str, Any]]
) -> None:
    path = write_lines(tmp_path / "s.jsonl", slice_emails)
    load_file(ddb, table, path, MAILBOX, atomic=False)
    good = scan(ddb, table)
    summaries = [k for k in good if k[1] == "THREAD"]
    for pk, sk in summaries:  # as if the load died before recomputing the summaries
        ddb.delete_item(TableName=table, Key={"PK": {"S": pk}, "SK": {"S": sk}})
    assert load_file(ddb, table, path, MAILBOX, atomic=False).already_present == len(slice_emails)
    assert scan(ddb, table) == good
