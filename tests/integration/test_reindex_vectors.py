"""Acceptance for the vector side: a reindex to a new encoder configuration (a new collection,
truncating at another length) completes under concurrent writes that change ``forai``, with
zero drift in either collection, while semantic searches (every 300 ms) never fail.

The embedded store is owned by ``sidecar serve`` throughout: the reindex drives it through
the vectors queue only. Run with ``-s`` for timings.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters.embedding.embedder import DIMENSION
from indexer.adapters.factories import vector_slug
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.cli.tail_cmds import build_tailer
from indexer.ops import reindex_vectors as ops
from indexer.settings import Settings
from sidecar_tools.writer.files import read_emails
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import store_message
from tests.support.api_fixtures import start_api
from tests.support.pipeline_helpers import embedded_hash, prepare_tables, table_messages, wait_until
from tests.support.reindex_load import (
    BOX,
    FIRST,
    OTHER,
    SAMPLE,
    Load,
    Searches,
    reindex_under_load,
    running,
    say,
)

# In embedded mode the API process also consumes the vectors queue (one owner of the store):
# on these 2 shared cores, 10 semantic searches a second (each embeds its query) starve it.
SEARCH_EVERY_S = 0.3


def _expected(ddb: Any, settings: Settings) -> dict[str, str]:
    """content_hash by message_key of every message that should have a point."""
    table = table_messages(ddb, settings.table, BOX)
    return {k: h for k, m in table.items() if (h := embedded_hash(m)) is not None}


def _points(store: Any, collection: str) -> dict[str, str]:
    return {
        p.payload["message_key"]: p.payload["content_hash"]
        for page in store.scroll(collection, None, None)
        for p in page
    }


def _converged(settings: Settings, ddb: Any, collections: list[str]) -> bool:
    """Every collection holds exactly the table's points, made from the table's ``forai``
    (asked of the API process, which owns the store)."""
    want, admin = _expected(ddb, settings), ops.Admin(settings, 60)
    return all(admin("hashes", collection=c, mailbox_id=BOX) == want for c in collections)


@pytest.mark.stack
def test_vector_reindex_under_writes_and_searches(settings: Settings, tmp_path: Path) -> None:
    settings = settings.model_copy(update={"batch_messages": 16, "embed_max_tokens": 64})
    started = time.monotonic()
    ddb = prepare_tables(settings)
    emails = [e for _, e in read_emails(SAMPLE) if isinstance(e, dict)]
    for email in emails[:FIRST]:
        assert store_message(ddb, settings.table, to_items(email, BOX))
    load = Load(ddb, settings.table, emails, text=True, pause_s=0.5)
    with contextmanager(start_api)(settings, tmp_path, BOX, OTHER) as api:
        tailer = build_tailer(settings, "trim_horizon", lease_s=10.0, renew_s=2.0)
        searches, tail_stop = Searches(api.url, "semantic", SEARCH_EVERY_S), threading.Event()
        admin = ops.Admin(settings, 120)
        with running(lambda: tailer.run(tail_stop), tail_stop):
            assert wait_until(lambda: admin.state()[0] is not None, timeout=120)
            old = admin.state()[0]
            assert old is not None
            assert wait_until(lambda: _converged(settings, ddb, [old]), timeout=180)
            t_indexed = time.monotonic() - started
            run = reindex_under_load(searches, load, lambda: ops.reindex_vectors(
                settings, 32, settle_s=1.0, verify_timeout_s=120, say=say))
            report = run.report
            names = [report.old, report.new]
            assert wait_until(lambda: _converged(settings, ddb, names), timeout=90, interval=2)
            assert admin.state() == (report.new, report.old, old)
            assert ops.rollback_vectors(settings) == (report.old, report.new)
            assert ops.rollback_vectors(settings) == (report.new, report.old)
    print(
        f"\nindexed {FIRST} in {t_indexed:.1f}s; vector reindex {report.seconds:.1f}s "
        f"(backfilled {report.backfilled}, counts {report.counts}); load {load.done}; "
        f"{searches.issued} semantic searches issued, {searches.ok} ok, "
        f"{len(searches.failures)} failed; "
        f"total {time.monotonic() - started:.1f}s"
    )
    searches.assert_never_failed(run.window_s, run.during)
    assert load.done["delete"] and load.done["rewrite"] and load.done["store"]
    base = f"{settings.qdrant_collection}-{vector_slug(settings)}"  # -int8 by default
    assert report.old == old == f"{base}-subject-forai"
    assert report.new == f"{base}-t32-subject-forai"  # the recipe stays the last part
    client = build_store(settings)  # the API has stopped: this process may open the store
    try:
        want = _expected(ddb, settings)
        for collection in names:
            assert _points(client, collection) == want, collection
        index = VectorIndex(client, settings.qdrant_collection, vector_slug(settings), DIMENSION)
        assert client.count(f"{report.new}-cache", None)
        assert client.aliases() == {
            index.alias: report.new,
            f"{index.alias}-write": report.old,
        }
    finally:
        client.close()
