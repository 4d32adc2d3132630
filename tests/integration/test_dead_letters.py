"""Dead letters hold only what redrive needs, and expire (issue 16), in the sidecar's own
DynamoDB table (issue 23: not Redis, whose ``volatile-lru`` evicts keys with a TTL first), on
the moto server and the real Redis."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.io import items
from indexer.adapters.dynamodb import dlq
from indexer.adapters.dynamodb.tables import TTL_ATTRIBUTE
from indexer.core.items import message_pk
from indexer.pipeline.redrive import redrive
from indexer.settings import Settings, to_env
from tests.support.pipeline_helpers import ingest_files, opensearch_docs, prepare_tables, workers

pytestmark = [pytest.mark.stack]

BCC = "secret-bcc-person@hidden.example"
BODY = "confidential merger terms for the board only"
KEY = hashlib.sha256(b"<poison@example.org>").hexdigest()
SECRETS = (BCC, "secret-bcc", "Secret Person", "confidential", "merger")


def poison_records(mailbox: str) -> list[dict[str, object]]:
    """A bcc participant item and a body item, each with an image that cannot be decoded."""
    participant = {
        "eventName": "INSERT",
        "dynamodb": {
            "Keys": {"PK": {"S": f"M#{mailbox}#A#{BCC}"}, "SK": {"S": f"001709294400#{KEY}#bcc"}},
            "NewImage": {
                "email": {"S": BCC},
                "name": {"S": "Secret Person"},
                "role": {"S": "bcc"},
                "broken": {"ZZ": "1"},
            },
            "SequenceNumber": "100000000000000000001",
        },
    }
    body = {
        "eventName": "MODIFY",
        "dynamodb": {
            "Keys": {"PK": {"S": message_pk(mailbox, KEY)}, "SK": {"S": "BODY"}},
            "NewImage": {"clean": {"S": BODY}, "text": {"S": BODY}, "broken": {"ZZ": 2}},
            "OldImage": {"clean": {"S": BODY}},
            "SequenceNumber": "100000000000000000002",
        },
    }
    return [participant, body]


def redis_contents(settings: Settings) -> str:
    client = factories.redis_client(settings)
    readers = {
        b"string": client.get,
        b"zset": lambda k: client.zrange(k, 0, -1),
        b"hash": client.hgetall,
        b"list": lambda k: client.lrange(k, 0, -1),
        b"set": client.smembers,
    }
    keys = list(client.scan_iter(match=f"{settings.queue_prefix}*", count=500))
    return " ".join(k.decode() + repr(readers[client.type(k)](k)) for k in keys)


def stored_items(settings: Settings) -> list[dict[str, Any]]:
    """The dead-letter store's raw items, read from the sidecar's table directly."""
    return list(items(
        aws.client(settings, "dynamodb"), "query", TableName=settings.resolved_state_table,
        KeyConditionExpression="PK = :pk", ConsistentRead=True,
        ExpressionAttributeValues={":pk": {"S": f"DLQ#{settings.queue_prefix}"}},
    ))


def flush_own_redis_keys(settings: Settings) -> int:
    """What an eviction (or a FLUSHALL) does to this test's data: every key of its prefix
    gone. Only the test's own keys: the Redis is shared."""
    client = factories.redis_client(settings)
    keys = list(client.scan_iter(match=f"{settings.queue_prefix}*", count=500))
    return int(client.delete(*keys)) if keys else 0


def test_poison_records_leave_no_address_or_body_in_any_store(
    settings: Settings, tmp_path: Path
) -> None:
    prepare_tables(settings)
    path = tmp_path / "poison.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in poison_records("box")))
    summary = ingest_files(settings, [str(path)])
    assert summary.decode_failed == summary.dead_lettered == 2
    stored = json.dumps(stored_items(settings)) + redis_contents(settings)
    assert "entry" in stored
    for secret in SECRETS:
        assert secret not in stored
    entries = factories.dead_letters(settings).list()
    assert {e.reason.split(":")[0] for e in entries} == {"NewImage.broken"}
    by_seq = {e.payload["dynamodb"]["SequenceNumber"]: e for e in entries}
    participant, body = by_seq["100000000000000000001"], by_seq["100000000000000000002"]
    # The participant's key holds its address: it is kept as its message's pointer key.
    assert participant.payload["dynamodb"]["Keys"] == {
        "PK": {"S": message_pk("box", KEY)},
        "SK": {"S": "META"},
    }
    assert set(body.payload) == {"eventName", "dynamodb"}
    assert set(body.payload["dynamodb"]) == {"Keys", "SequenceNumber"}
    assert all(e.source and e.time and e.stage == "decode" for e in entries)


def test_malformed_participant_records_keep_the_message_pointer_only(
    settings: Settings, tmp_path: Path
) -> None:
    """Issue 23: a participant record whose SK does not parse kept its PK — the address."""
    prepare_tables(settings)
    records = []
    for n, sk in enumerate((f"bad-ts#{KEY}#bcc", f"001709294400#{KEY}#boss", BCC, "")):
        record: dict[str, Any] = poison_records("box")[0]
        record["dynamodb"]["Keys"]["SK"] = {"S": sk}
        record["dynamodb"]["SequenceNumber"] = f"2000000000000000000{n}"
        records.append(record)
    path = tmp_path / "participants.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert ingest_files(settings, [str(path)]).dead_lettered == 4
    stored = json.dumps(stored_items(settings)) + redis_contents(settings)
    for secret in SECRETS:
        assert secret not in stored
    entries = factories.dead_letters(settings).list()
    keys = {e.payload["dynamodb"]["SequenceNumber"]: e.payload["dynamodb"].get("Keys")
            for e in entries}
    pointer = {"PK": {"S": message_pk("box", KEY)}, "SK": {"S": "META"}}
    # A message key in the SK makes the pointer; without one no key at all is kept.
    assert [keys[f"2000000000000000000{n}"] for n in range(4)] == [pointer, pointer, None, None]
    with workers(settings):
        assert redrive(settings, None, wait=True) == {"redriven": 4, "failed_again": 2}


def test_entries_expire_after_the_retention(settings: Settings) -> None:
    """The TTL attribute is the entry's time + SIDECAR_DLQ_TTL_DAYS, the table's TTL is on
    it, and an entry past it is never read (DynamoDB deletes it only days later)."""
    ddb = prepare_tables(settings)
    ttl = ddb.describe_time_to_live(TableName=settings.resolved_state_table)
    assert ttl["TimeToLiveDescription"] == {"TimeToLiveStatus": "ENABLED",
                                            "AttributeName": TTL_ATTRIBUTE}
    three_days = settings.model_copy(update={"dlq_ttl_days": 3})
    store = factories.dead_letters(three_days)
    entry = store.add(stage="fulltext", reason="x", payload={"messages": []}, mailbox_id="m")
    [item] = stored_items(settings)
    assert int(item[TTL_ATTRIBUTE]["N"]) == int(entry.time + 3 * 86_400)
    assert abs(entry.time - time.time()) < 60

    table = settings.resolved_state_table
    old = dlq.DeadLetterStore(ddb, table, settings.queue_prefix, 3,
                              clock=lambda: time.time() - 3 * 86_400 - 5)
    gone = old.add(stage="vectors", reason="old", payload={}, mailbox_id="m")
    assert len(stored_items(settings)) == 2  # still in the table: DynamoDB deletes it late
    assert [e.id for e in store.list()] == [entry.id] and store.count() == 1
    assert store.get(gone.id) is None and store.get(entry.id) == entry


def test_entries_survive_a_redis_flush_and_list_in_time_order(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, table = prepare_tables(settings), settings.resolved_state_table
    start = time.time()
    added = []
    for n in (2, 0, 1, 3, 4):  # written out of time order
        store = dlq.DeadLetterStore(client, table, settings.queue_prefix,
                                    clock=lambda n=n: start + n)
        added.append(store.add(stage="fulltext", reason=f"r{n}", payload={"messages": []},
                               mailbox_id="m"))
    other = dlq.DeadLetterStore(client, table, f"{settings.queue_prefix}-other")
    other.add(stage="vectors", reason="another store", payload={})
    factories.redis_client(settings).set(f"{settings.queue_prefix}:probe", "1")
    assert flush_own_redis_keys(settings) >= 1

    monkeypatch.setattr(dlq, "PAGE", 2)  # three Query pages: the paginator follows them
    store = factories.dead_letters(settings)
    listed = store.list()
    assert [e.reason for e in listed] == ["r0", "r1", "r2", "r3", "r4"]
    assert listed == sorted(added, key=lambda e: e.time)
    assert [e.reason for e in store.list(2)] == ["r0", "r1"]
    assert store.count() == 5 and store.count(cap=3) == 3
    assert store.get(added[0].id) == added[0] and store.get("0" * 32) is None
    assert store.remove(added[0].id) and not store.remove(added[0].id)
    assert [e.reason for e in other.list()] == ["another store"]


def test_a_redriven_trigger_reindexes_its_message(settings: Settings, tmp_path: Path) -> None:
    """Keys are enough: the redriven record makes the worker re-read the table (here: the
    message is not there, so nothing is indexed and nothing fails)."""
    prepare_tables(settings)
    path = tmp_path / "poison.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in poison_records("box")))
    ingest_files(settings, [str(path)])
    with workers(settings):
        result = redrive(settings, None, wait=True)
    assert result == {"redriven": 2, "failed_again": 0}
    assert factories.dead_letters(settings).list() == [] and opensearch_docs(settings, "box") == {}


def test_ingest_exits_1_when_anything_was_dead_lettered(settings: Settings, tmp_path: Path) -> None:
    prepare_tables(settings)
    path = tmp_path / "poison.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in poison_records("box")))
    cli = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "ingest", "--wait", "--json", str(path)],
        env={**os.environ, **to_env(settings)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 1, cli.stderr
    summary = json.loads(cli.stdout)
    assert summary["read"] == 2 and summary["dead_lettered"] == 2 and summary["waited"]


def _sidecar(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", *args],
        env={**os.environ, **to_env(settings), "COLUMNS": "200"},  # ids unwrapped in the table
        capture_output=True, text=True, timeout=300, check=False,
    )


def test_dlq_commands_list_show_and_redrive_the_table_entries(settings: Settings) -> None:
    prepare_tables(settings)
    store = factories.dead_letters(settings)
    entry = store.add(stage="fulltext", reason="mapping rejected", mailbox_id="box",
                      payload={"messages": [["box", KEY]], "participants": []})
    listed = _sidecar(settings, "dlq", "list")
    assert listed.returncode == 0 and entry.id in listed.stdout and "(1)" in listed.stdout
    shown = _sidecar(settings, "dlq", "show", entry.id)
    assert shown.returncode == 0 and json.loads(shown.stdout) == json.loads(entry.to_json())
    assert _sidecar(settings, "dlq", "show", "0" * 32).returncode == 1
    resent = _sidecar(settings, "dlq", "redrive", "--no-wait", entry.id)
    assert json.loads(resent.stdout) == {"redriven": 1, "failed_again": None}, resent.stderr
    assert store.list() == [] and factories.redis_client(settings).llen(settings.fulltext_queue) == 1
