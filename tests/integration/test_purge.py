"""``purge``: a mailbox leaves no document, point, cached vector of its own text, participant
item, dead letter or task result behind (each store queried), others are untouched, and a
second purge removes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.adapters.opensearch.contacts import ContactsIndex
from indexer.core.vectors import PointWrite
from indexer.ops.engines import open_engines
from indexer.ops.purge import purge
from indexer.ops.reconcile import reconcile
from indexer.settings import Settings, to_env
from tests.support.ops_helpers import index_mailboxes
from tests.support.pipeline_helpers import opensearch_docs, qdrant_points, table_messages

pytestmark = pytest.mark.stack


def _participant_items(ddb: Any, settings: Settings, mailbox: str) -> int:
    page = ddb.scan(
        TableName=settings.resolved_state_table,
        FilterExpression="begins_with(PK, :p)",
        ExpressionAttributeValues={":p": {"S": f"P#{mailbox}#"}},
        ConsistentRead=True,
    )
    assert "LastEvaluatedKey" not in page
    return len(page["Items"])


def _hashes(settings: Settings, mailbox: str) -> set[str]:
    return {p["content_hash"] for p in qdrant_points(settings, mailbox).values()}


def test_purge_removes_every_trace(settings: Settings, tmp_path: Path, unique: str) -> None:
    box, other = f"gone-{unique}@x.org", f"kept-{unique}@x.org"
    ddb = index_mailboxes(settings, tmp_path, {box: 6, other: 2})
    shared_texts = _hashes(settings, other)
    own_texts = _hashes(settings, box) - shared_texts
    assert len(own_texts) == 4 and len(shared_texts) == 2
    assert _participant_items(ddb, settings, box) > 0

    key = next(iter(table_messages(ddb, settings.table, box)))
    dlq = factories.dead_letters(settings)
    dlq.add(stage="fulltext", reason="t", payload={"messages": [[box, key]]}, mailbox_id=box)
    keys = {"PK": {"S": f"M#{box}#MSG#{key}"}, "SK": {"S": "META"}}
    dlq.add(stage="decode", reason="t", payload={"dynamodb": {"Keys": keys}})
    kept = dlq.add(stage="vectors", reason="t", payload={}, mailbox_id=other)
    redis = factories.redis_client(settings)
    result_key = f"celery-task-meta-{uuid.uuid4()}"
    redis.set(result_key, json.dumps({"result": {"dead_lettered": [[box, key]]}}), ex=600)

    with open_engines(settings) as engines:  # a collection a vectors reindex is building
        building = f"{engines.vectors.collection}-t128"
        engines.vectors.store.create(building, 384, ())
        point = PointWrite(str(uuid.uuid4()), [0.1] * 384, {"mailbox_id": box})
        engines.vectors.store.upsert(building, [point])

    report = purge(settings, box)
    assert report.to_json() == {
        "mailbox_id": box,
        "fulltext_docs": 6,
        "vector_points": 7,
        "cached_vectors": 4,
        "participants": report.participants,
        "dead_letters": 2,
        "task_results": 1,
        "table_still_has_messages": True,
        "contacts": report.contacts,
        "removed": 20 + report.participants + report.contacts,
        "seconds": report.seconds,
    }
    assert set(report.seconds) == {"open", "opensearch", "contacts", "qdrant", "participants",
                                   "check", "dead_letters", "task_results"}
    assert report.participants > 0
    assert report.contacts > 0  # the correspondents of its messages, kept by the workers

    # Each store, queried directly.
    assert opensearch_docs(settings, box) == {}
    assert qdrant_points(settings, box) == {}
    with open_engines(settings) as engines:
        assert set(engines.vectors.cached_vectors(own_texts)) == set()
        assert set(engines.vectors.cached_vectors(shared_texts)) == shared_texts
        assert box not in engines.vectors.mailbox_ids() | engines.fulltext.mailbox_ids()
        assert engines.vectors.store.count(building, None) == 0
    assert _participant_items(ddb, settings, box) == 0
    with open_engines(settings) as engines:
        summary = ContactsIndex(engines.fulltext)
        summary.refresh()
        assert summary.emails(box, summary=True) == set()
        assert summary.emails(other, summary=True)  # the other mailbox's are kept
    assert [e.id for e in dlq.list()] == [kept.id]
    assert not redis.exists(result_key)

    # The other mailbox is intact; the purged one is only "missing" (the table still has it).
    assert reconcile(settings, mailbox=other).drifted == 0
    again = reconcile(settings, mailbox=box)
    assert {(d.index, d.kind) for d in again.found} == {
        ("fulltext", "missing"),
        ("vectors", "missing"),
    }
    assert len(opensearch_docs(settings, other)) == 2

    # Idempotent, through the CLI.
    cli = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "purge", "--mailbox", box, "--json"],
        env={**os.environ, **to_env(settings)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["removed"] == 0
    assert (box, key) not in qdrant_points(settings)


def test_purge_rejects_a_bad_mailbox_id(settings: Settings) -> None:
    with pytest.raises(ValueError, match="#"):
        purge(settings, "a#b")


def test_purge_without_the_sidecar_table_refuses_before_deleting_anything(
    settings: Settings, tmp_path: Path, unique: str
) -> None:
    """A misconfigured state table (never created, or a wrong name) ends the command with
    status 2 and one line naming the table, and the mailbox's documents are still there."""
    box = f"kept-{unique}@x.org"
    index_mailboxes(settings, tmp_path, {box: 2})
    wrong = settings.model_copy(update={"state_table": f"missing-{unique}"})
    cli = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "purge", "--mailbox", box, "--json"],
        env={**os.environ, **to_env(wrong)}, capture_output=True, text=True, timeout=300,
    )
    assert cli.returncode == 2, cli.stderr
    assert f"missing-{unique}" in cli.stderr and "does not exist" in cli.stderr
    assert "Traceback" not in cli.stderr
    assert len(opensearch_docs(settings, box)) == 2


def test_purge_is_paced_at_the_rate_asked(settings: Settings, tmp_path: Path,
                                          unique: str) -> None:
    """``--rate 20`` deletes 20 messages from each engine in about a second (batches of two,
    OpenSearch throttling its own delete-by-query task, the vector deletes sleeping between
    batches) where unpaced they take milliseconds; everything is still removed."""
    box = f"paced-{unique}@x.org"
    index_mailboxes(settings, tmp_path, {box: 20})
    cli = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "purge", "--mailbox", box, "--rate", "20",
         "--json"],
        env={**os.environ, **to_env(settings)}, capture_output=True, text=True, timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    report = json.loads(cli.stdout)
    assert report["fulltext_docs"] == 20 and report["vector_points"] == 20
    # 20 documents at 20/s: 9 pauses of 0.1 s at least after the first batch of each engine
    assert report["seconds"]["opensearch"] >= 0.85
    assert report["seconds"]["qdrant"] >= 0.85
    assert opensearch_docs(settings, box) == {} and qdrant_points(settings, box) == {}
    # the delete-by-query task's record (OpenSearch keeps one per task not waited for) removed
    alias = factories.fulltext_index(settings).alias
    assert task_records_naming(settings, f"delete-by-query [{alias}-v*]") == []

    refused = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "purge", "--mailbox", box, "--rate", "-1"],
        env={**os.environ, **to_env(settings)}, capture_output=True, text=True, timeout=300,
    )
    assert refused.returncode == 2 and "rate" in refused.stderr


def task_records_naming(settings: Settings, text: str) -> list[str]:
    """Ids of the task records OpenSearch keeps (``.tasks``) whose description names
    ``text``."""
    client = factories.fulltext_index(settings).client
    with warnings.catch_warnings():  # "this request accesses system indices"
        warnings.simplefilter("ignore")
        if not client.indices.exists(index=".tasks"):
            return []
        client.indices.refresh(index=".tasks")
        hits = client.search(index=".tasks", body={"size": 10000})["hits"]["hits"]
    return [h["_id"] for h in hits if text in str(h["_source"]["task"].get("description"))]


def test_a_whales_participant_items_go_in_batches_and_no_one_elses(
    settings: Settings, unique: str
) -> None:
    """More items than one ``BatchWriteItem`` takes, found by every segment of the parallel
    scan; another mailbox whose id starts alike, and the table's other items, stay."""
    from tests.support.pipeline_helpers import prepare_tables

    ddb = prepare_tables(settings)
    table = settings.resolved_state_table
    box, alike = f"whale-{unique}@x.org", f"whale-{unique}@x.org.uk"
    for mailbox, count in ((box, 130), (alike, 7)):
        for n in range(count):
            ddb.put_item(TableName=table, Item={
                "PK": {"S": f"P#{mailbox}#k{n:04d}"}, "SK": {"S": "PEOPLE"},
                "people": {"S": "[]"}})
    store = factories.store(settings)
    assert store.delete_participants_of_mailbox(box) == 130
    assert _participant_items(ddb, settings, box) == 0
    assert _participant_items(ddb, settings, alike) == 7
    assert store.delete_participants_of_mailbox(box) == 0
