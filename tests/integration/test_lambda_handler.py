"""The Lambda entry point on real event shapes: records read from the stream of a real moto
table (written by the real store writer), wrapped as Lambda's DynamoDB event-source mapping
delivers them (``eventSourceARN``, ``eventSource: aws:dynamodb``, ``awsRegion``), applied to
the real OpenSearch, with the vectors applied by a real vectors worker through Redis.

The failure is real too: OpenSearch is reached through a forwarder that dies after the first
bulk request, so the second batch of the invocation meets a refused connection.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.streams import iter_stream_records, latest_stream_arn
from indexer.core.plan import Plan
from indexer.core.records import decode_record
from indexer.settings import Settings, get_settings
from indexer.sources.lambda_handler import handler, process
from sidecar_tools.writer.files import load_file
from sidecar_tools.writer.store import delete_message
from tests.conftest import CORPORA
from tests.support.engine_proxy import DyingProxy
from tests.support.pipeline_helpers import (
    opensearch_docs,
    prepare_tables,
    qdrant_points,
    table_messages,
    workers,
)

LKML = CORPORA / "notmuch-lkml.jsonl.gz"
pytestmark = [pytest.mark.stack, pytest.mark.slow]


class Context:
    """What the Lambda runtime passes as ``context`` (the one method the handler calls)."""

    def __init__(self, millis: int) -> None:
        self.millis = millis

    def get_remaining_time_in_millis(self) -> int:
        return self.millis


def _load(settings: Settings, tmp_path: Path, count: int, mailbox: str) -> list[dict[str, Any]]:
    sample = tmp_path / "sample.jsonl"
    with gzip.open(LKML, "rt", encoding="utf-8") as fh:
        sample.write_text("".join(next(fh) for _ in range(count)))
    ddb = prepare_tables(settings)
    assert load_file(ddb, settings.table, sample, mailbox).stored == count
    return [json.loads(line) for line in sample.read_text().splitlines()]


def _lambda_records(settings: Settings) -> list[dict[str, Any]]:
    """The table's stream records as an event-source mapping delivers them."""
    ddb = aws.client(settings, "dynamodb")
    arn = latest_stream_arn(ddb, settings.table)
    records = list(iter_stream_records(aws.client(settings, "dynamodbstreams"), arn))
    return [
        {**r, "eventSource": "aws:dynamodb", "eventVersion": "1.1", "awsRegion": "us-east-1",
         "eventSourceARN": arn}
        for r in records
    ]


def _message_key(record: dict[str, Any]) -> str | None:
    """The message a record triggers a sync of, by the planner's rules (None: nothing)."""
    touched = Plan().add(decode_record(record))
    return next(iter(touched)).message_key if touched else None


def _poison(arn: str, sequence: str) -> list[dict[str, Any]]:
    """Two records no retry can fix: no ``dynamodb`` object, and an item of unknown shape."""
    base = {"eventSource": "aws:dynamodb", "awsRegion": "us-east-1", "eventSourceARN": arn}
    keys = {"PK": {"S": "M#box#WHAT#1"}, "SK": {"S": "???"}}
    return [
        {**base, "eventName": "INSERT", "eventID": "p1"},
        {**base, "eventName": "INSERT", "eventID": "p2",
         "dynamodb": {"Keys": keys, "SequenceNumber": sequence}},
    ]


def test_handler_applies_a_batch_and_dead_letters_poison(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emails = _load(settings, tmp_path, 5, "box")
    ddb = aws.client(settings, "dynamodb")
    assert delete_message(ddb, settings.table, "box", emails[0]["messageId"])
    records = _lambda_records(settings)
    assert any(r["eventName"] == "REMOVE" for r in records)
    poison = _poison(records[0]["eventSourceARN"], "1" + records[0]["dynamodb"]["SequenceNumber"])
    event = {"Records": [*records[:3], *poison, *records[3:]]}

    for name in ("table", "opensearch_index", "qdrant_collection", "queue_prefix"):
        monkeypatch.setenv(f"SIDECAR_{name.upper()}", str(getattr(settings, name)))
    monkeypatch.setenv("SIDECAR_QDRANT_PATH", str(settings.qdrant_path))
    get_settings.cache_clear()
    try:
        with workers(settings, roles=("vectors",)):
            assert handler(event, Context(600_000)) == {"batchItemFailures": []}
    finally:
        get_settings.cache_clear()

    table = table_messages(ddb, settings.table, "box")
    assert len(table) == 4
    assert set(opensearch_docs(settings, "box")) == set(table)
    assert set(qdrant_points(settings, "box")) == {("box", k) for k in table}
    letters = factories.dead_letters(settings).list()
    assert sorted(d.stage for d in letters) == ["decode", "decode"]
    assert {d.source for d in letters} == {
        f"lambda:{records[0]['eventSourceARN']}#?",
        f"lambda:{records[0]['eventSourceARN']}#{poison[1]['dynamodb']['SequenceNumber']}",
    }


def test_engine_failing_mid_batch_reports_exactly_the_unapplied_records(
    settings: Settings, tmp_path: Path
) -> None:
    _load(settings, tmp_path, 6, "box")
    records = _lambda_records(settings)
    factories.fulltext_index(settings)  # the index exists, so the forwarder sees bulks only after it
    proxy = DyingProxy(settings.opensearch_url, bulks=1)
    through = settings.model_copy(update={"opensearch_url": proxy.url, "batch_messages": 2})
    order = list(dict.fromkeys(k for r in records if (k := _message_key(r)) is not None))
    assert len(order) == 6

    with workers(settings, roles=("vectors",)):
        first = process({"Records": records}, through, budget=300)
        assert proxy.dead.is_set()
        docs = opensearch_docs(settings, "box")
        # The first batch (two messages) went through; the other four messages failed.
        assert set(docs) == set(order[:2])
        reported = set(first.failures)
        assert len(first.failures) == len(reported)
        for record in records:
            key = _message_key(record)
            seq = record["dynamodb"]["SequenceNumber"]
            assert (seq in reported) == (key is not None and key not in docs), (key, seq)
        assert first.dead_lettered == 0

        # Lambda delivers the batch again from the lowest reported sequence number on.
        lowest = min(reported, key=int)
        start = next(i for i, r in enumerate(records) if r["dynamodb"]["SequenceNumber"] == lowest)
        assert start > 0
        direct = settings.model_copy(update={"batch_messages": 2})
        second = process({"Records": records[start:]}, direct, budget=300)
        assert second.failures == []

    table = table_messages(aws.client(settings, "dynamodb"), settings.table, "box")
    assert set(opensearch_docs(settings, "box")) == set(table) == set(order)
    assert set(qdrant_points(settings, "box")) == {("box", k) for k in table}
    assert factories.dead_letters(settings).list() == []


def test_a_dead_letter_that_cannot_be_written_is_reported(settings: Settings) -> None:
    """Redis unreachable (a closed port): the poison record is not dropped but redelivered."""
    from tests.support.api_fixtures import free_port

    arn = "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/x"
    records = _poison(arn, "123")
    nowhere = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"})
    assert process({"Records": records[1:]}, nowhere, budget=10).failures == ["123"]
    with pytest.raises(RuntimeError, match="no SequenceNumber"):
        process({"Records": records[:1]}, nowhere, budget=10)  # nothing to report it by
    with pytest.raises(ValueError, match="'Records' list"):
        process({"records": []}, settings, budget=10)
    assert process({"Records": []}, settings, budget=10).response() == {"batchItemFailures": []}
