"""The search join's reads of the table (issue 28): a page is read eventually consistent in one
BatchGetItem, and only the keys it missed are read again, strongly, before a hit is dropped.

Against the stack's DynamoDB (moto server); the requests are counted with a botocore hook on
the API's own client."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.settings import Settings
from search_api.backends import Backends
from search_api.candidates import Candidate
from search_api.hits import join_rows
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import store_message
from tests.conftest import CORPORA
from tests.support.mail_helpers import corpus
from tests.support.pipeline_helpers import prepare_tables

pytestmark = [pytest.mark.stack]
BOX = "reads@example.com"


def _reads(backends: Backends) -> list[tuple[bool, int]]:
    """(ConsistentRead, number of keys) of each BatchGetItem the API's client sends."""
    seen: list[tuple[bool, int]] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        for request in params["RequestItems"].values():
            seen.append((bool(request.get("ConsistentRead")), len(request["Keys"])))

    backends.store._client.meta.events.register(
        "before-parameter-build.dynamodb.BatchGetItem", record
    )
    return seen


def test_a_page_is_read_once_eventually_and_only_its_misses_strongly(settings: Settings) -> None:
    ddb = prepare_tables(settings)
    items = [to_items(e, BOX) for e in corpus(CORPORA / "notmuch-lkml.jsonl.gz")[:3]]
    for item in items:
        assert store_message(ddb, settings.table, item)
    messages = [item.message for item in items]
    page = [Candidate(m["message_key"], m["thread_key"], int(m["ts"]), 1.0) for m in messages]
    backends = Backends(settings, serves_vectors=False)
    try:
        seen = _reads(backends)
        joined, _ = join_rows(backends, BOX, page)
        assert [c.message_key for c, _ in joined] == [c.message_key for c in page]
        threads = len({c.thread_key for c in page})
        assert seen == [(False, len(page) + threads)]  # one eventual read, nothing re-read

        seen.clear()
        ghost = Candidate("f" * 64, page[0].thread_key, 1, 1.0)  # indexed, never stored
        joined, _ = join_rows(backends, BOX, [page[0], ghost])
        assert [c.message_key for c, _ in joined] == [page[0].message_key]  # dropped, repaired
        assert seen == [(False, 3), (True, 1)]  # the one miss re-read strongly before dropping
    finally:
        backends.close()
