"""Load many real messages into a test's table and index fast, for the API's cost and
isolation tests (issue 23): each message's hot row, pointer and thread summary are written
with BatchWriteItem, and its search document (the indexer's own projection,
:func:`indexer.core.documents.search_document`) is bulk-written by the sidecar's OpenSearch
adapter. The pipeline's correctness is tested elsewhere; what these tests need is 4,000
messages in seconds, indexed exactly as the pipeline would index them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.core.documents import MessageState, Participant, search_document
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from sidecar_tools.writer.mapping import to_items

_SER = TypeSerializer()


def load_mailbox(settings: Settings, mailbox: str, emails: Iterable[dict[str, Any]]) -> int:
    """Store and index ``emails`` in ``mailbox``; returns how many were indexed."""
    ddb = aws.client(settings, "dynamodb")
    index = factories.fulltext_index(settings)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    docs: dict[MessageRef, dict[str, Any] | None] = {}
    for email in emails:
        items = to_items(email, mailbox)
        rows[(items.message["PK"], items.message["SK"])] = items.message
        rows[(items.pointer["PK"], items.pointer["SK"])] = items.pointer
        thread = rows.setdefault((items.thread.pk, "THREAD"), {
            "PK": items.thread.pk, "SK": "THREAD", "message_count": 0})
        thread["message_count"] += 1
        people = [Participant(p["role"], p["email"], p.get("name")) for p in items.participants]
        ref = MessageRef(mailbox, items.message_key)
        docs[ref] = search_document(MessageState(ref, items.message, items.body, people))
    _batch_put(ddb, settings.table, list(rows.values()))
    refs = list(docs)
    for start in range(0, len(refs), 500):
        chunk = {r: docs[r] for r in refs[start : start + 500]}
        rejected = index.apply(chunk)
        assert not rejected, rejected
    index.refresh()
    return len(docs)


def _batch_put(ddb: Any, table: str, items: list[dict[str, Any]]) -> None:
    for start in range(0, len(items), 25):
        requests = [
            {"PutRequest": {"Item": {k: _SER.serialize(v) for k, v in item.items()}}}
            for item in items[start : start + 25]
        ]
        pending: dict[str, Any] = {table: requests}
        while pending:
            pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
