"""Helpers for pipeline tests: real workers as subprocesses, real engines, the real writer."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.streams import export_records
from indexer.adapters.dynamodb.tables import init_tables
from indexer.adapters.embedding.embedder import DIMENSION
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.documents import text_hash
from indexer.core.recipes import DEFAULT_RECIPE, Recipe, embedded_text
from indexer.pipeline.dispatch import ingestor
from indexer.pipeline.ingest import IngestSummary
from indexer.pipeline.workers import ROLES, spawn_workers, stop_workers
from indexer.settings import Settings
from indexer.sources.files import read_sources
from tests.support.waiting import (
    wait_until as wait_until,  # re-exported; defined in tests/support/waiting.py
)


def prepare_tables(settings: Settings) -> Any:
    ddb = aws.client(settings, "dynamodb")
    init_tables(ddb, settings, mail_table=True)  # as `sidecar init --mail-table`
    return ddb


def export_stream(settings: Settings, out: Path) -> int:
    return export_records(
        aws.client(settings, "dynamodb"),
        aws.client(settings, "dynamodbstreams"),
        settings.table,
        out,
    )


@contextmanager
def workers(
    settings: Settings, roles: tuple[str, ...] = ROLES
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Real Celery workers on this test's queues; stopped (warm) on exit."""
    procs = spawn_workers(settings, roles, 1, loglevel="WARNING", own_session=True)
    try:
        yield procs
    finally:
        stop_workers(procs)


def ingest_files(settings: Settings, paths: list[str], timeout: float = 900) -> IngestSummary:
    run = ingestor(settings)
    run.feed_all(read_sources(paths, aws.client(settings, "s3")))
    return run.wait(timeout)


def ingest_fulltext(settings: Settings, tmp: Path, timeout: float = 300) -> int:
    """The table's stream through the pipeline, full-text tasks only (for tests with no
    vectors worker); waits, and returns the dead-lettered count."""
    from indexer.pipeline.dispatch import celery_send, decode_dead_letter, only_stage
    from indexer.pipeline.ingest import Ingestor

    records = tmp / f"{settings.table}-{uuid.uuid4().hex[:6]}.jsonl"
    export_stream(settings, records)
    run = Ingestor(
        only_stage(celery_send(settings), "fulltext"),
        decode_dead_letter(settings),
        settings.batch_messages,
    )
    run.feed_all(read_sources([str(records)], aws.client(settings, "s3")))
    return run.wait(timeout).dead_lettered


def embedded_hash(item: dict[str, Any], recipe: Recipe = DEFAULT_RECIPE) -> str | None:
    """The ``content_hash`` a message item's point must carry (None: no point)."""
    text = embedded_text(recipe, item.get("subject"), item.get("forai"))
    return None if text is None else text_hash(text)


def table_messages(ddb: Any, table: str, mailbox: str) -> dict[str, dict[str, Any]]:
    """Message items of a mailbox by message_key (GSI1, paged)."""
    from indexer.adapters.aws.io import plain

    found: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {
        "TableName": table,
        "IndexName": "GSI1",
        "KeyConditionExpression": "GSI1PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": f"M#{mailbox}"}},
    }
    while True:
        page = ddb.query(**kwargs)
        for raw in page["Items"]:
            item = plain(raw)
            found[item["message_key"]] = item
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def opensearch_docs(settings: Settings, mailbox: str) -> dict[str, dict[str, Any]]:
    client = factories.fulltext_index(settings).client
    client.indices.refresh(index=settings.opensearch_index)
    hits: dict[str, dict[str, Any]] = {}
    body = {"query": {"term": {"mailbox_id": mailbox}}, "size": 1000, "sort": ["message_key"]}
    for hit in client.search(index=settings.opensearch_index, body=body, routing=mailbox)["hits"][
        "hits"
    ]:
        hits[hit["_source"]["message_key"]] = hit["_source"]
    return hits


def qdrant_points(
    settings: Settings, mailbox: str | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """Points by (mailbox, message_key); opens the embedded store, so workers must be stopped."""
    from indexer.core.vectors import match

    store = build_store(settings)
    try:
        index = VectorIndex(store, settings.qdrant_collection, factories.vector_slug(settings), DIMENSION)
        if index.alias not in store.aliases():
            return {}
        flt = match("mailbox_id", mailbox) if mailbox is not None else None
        return {
            (p.payload["mailbox_id"], p.payload["message_key"]): p.payload
            for page in store.scroll(index.alias, flt, None)
            for p in page
        }
    finally:
        store.close()


def wait_contacts(settings: Settings, mailboxes: list[str], timeout: float = 30) -> None:
    """Until each mailbox's contact summary holds the addresses its messages hold (some): the
    workers recount a batch's contacts in a task due a second after the batch."""
    from indexer.pipeline.contacts_sync import keeper

    index = keeper(settings).index

    def settled() -> bool:
        index.messages.refresh()
        index.refresh()
        held = [index.emails(m, summary=False) for m in mailboxes]
        return all(held) and all(index.emails(m, summary=True) == h
                                 for m, h in zip(mailboxes, held, strict=True))

    assert wait_until(settled, timeout=timeout), "the contact summary did not settle"
