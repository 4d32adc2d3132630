"""Dead letters hold only what redrive needs, and expire (issue 16), on the real Redis."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from indexer.core.items import message_pk
from indexer.pipeline import deps
from indexer.pipeline.redrive import redrive
from indexer.settings import Settings, to_env
from tests.pipeline_helpers import ingest_files, opensearch_docs, prepare_tables, workers

pytestmark = [pytest.mark.stack]

BCC = "secret-bcc-person@hidden.example"
BODY = "confidential merger terms for the board only"
KEY = hashlib.sha256(b"<poison@example.org>").hexdigest()


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
    client = deps.redis_client(settings)
    readers = {
        b"string": client.get,
        b"zset": lambda k: client.zrange(k, 0, -1),
        b"hash": client.hgetall,
        b"list": lambda k: client.lrange(k, 0, -1),
        b"set": client.smembers,
    }
    keys = list(client.scan_iter(match=f"{settings.queue_prefix}*", count=500))
    return " ".join(k.decode() + repr(readers[client.type(k)](k)) for k in keys)


def test_poison_records_leave_no_address_or_body_in_redis(
    settings: Settings, tmp_path: Path
) -> None:
    prepare_tables(settings)
    path = tmp_path / "poison.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in poison_records("box")))
    summary = ingest_files(settings, [str(path)])
    assert summary.decode_failed == summary.dead_lettered == 2
    stored = redis_contents(settings)
    assert "dlq" in stored
    for secret in (BCC, "secret-bcc", "Secret Person", "confidential", "merger"):
        assert secret not in stored
    entries = deps.dead_letters(settings).list()
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


def test_entries_expire_after_the_retention(settings: Settings) -> None:
    store = deps.dead_letters(settings.model_copy(update={"dlq_ttl_days": 3}))
    entry = store.add(stage="fulltext", reason="x", payload={"messages": []}, mailbox_id="m")
    client = deps.redis_client(settings)
    ttl = client.ttl(f"{settings.queue_prefix}:dlq:entry:{entry.id}")
    assert 3 * 86_400 - 60 < ttl <= 3 * 86_400
    client.zadd(f"{settings.queue_prefix}:dlq:order", {"gone": 1.0})  # an expired entry's id
    assert [e.id for e in store.list()] == [entry.id] and store.count() == 1


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
    assert deps.dead_letters(settings).list() == [] and opensearch_docs(settings, "box") == {}


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
