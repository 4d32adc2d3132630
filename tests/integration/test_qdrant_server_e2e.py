"""The server path end to end, on a real Qdrant 1.18 server started with an API key: the
pipeline with one full-text worker and **two** ``--role vectors`` workers in parallel on one
queue (no single owner: nothing is embedded in-process), the API (semantic, hybrid, similar),
reconcile (zero drift), a vectors reindex with its alias swap under live writes and searches,
rollback, purge, and the tenant payload index on the server's collections.

Run with ``-s`` for timings.
"""

from __future__ import annotations

import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from indexer.adapters.embedding.embedder import DIMENSION
from indexer.adapters.factories import vector_slug
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.cli.tail_cmds import build_tailer
from indexer.core.vectors import match
from indexer.ops import reindex_vectors as ops
from indexer.ops.purge import purge
from indexer.ops.reconcile import reconcile
from indexer.pipeline.workers import spawn_workers, stop_workers
from indexer.settings import Settings
from sidecar_tools.writer.files import read_emails
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import store_message
from tests.integration.test_reindex_vectors import _converged, _expected
from tests.support.api_fixtures import start_api
from tests.support.pipeline_helpers import prepare_tables, wait_until
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

pytestmark = [pytest.mark.stack, pytest.mark.qdrant_server, pytest.mark.slow]


def _server_settings(settings: Settings, server: Any) -> Settings:
    return settings.model_copy(
        update={
            "qdrant_url": server.url,
            "qdrant_api_key": SecretStr(server.api_key),  # model_copy does not validate
            "qdrant_grpc_port": server.grpc_port,
            "batch_messages": 8,
            "embed_max_tokens": 64,
        }
    )


def _vector_workers(settings: Settings, log: Path) -> list[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        return spawn_workers(settings, ("vectors", "vectors"), 1, loglevel="INFO",
                             own_session=True, log=out)


def test_the_server_path_end_to_end(settings: Settings, qdrant_server: Any, tmp_path: Path) -> None:
    settings = _server_settings(settings, qdrant_server)
    started = time.monotonic()
    ddb = prepare_tables(settings)
    emails = [e for _, e in read_emails(SAMPLE) if isinstance(e, dict)]
    for email in emails[:FIRST]:
        assert store_message(ddb, settings.table, to_items(email, BOX))
    for email in emails[:5]:
        assert store_message(ddb, settings.table, to_items(email, OTHER))
    vectors = _vector_workers(settings, tmp_path / "vectors.log")
    try:
        with contextmanager(start_api)(settings, tmp_path, BOX, OTHER) as api:
            tailer = build_tailer(settings, "trim_horizon", lease_s=10.0, renew_s=2.0)
            tail_stop = threading.Event()
            admin = ops.Admin(settings, 120)
            with running(lambda: tailer.run(tail_stop), tail_stop):
                assert wait_until(lambda: admin.state()[0] is not None, timeout=180)
                old = admin.state()[0]
                assert old is not None
                assert wait_until(lambda: _converged(settings, ddb, [old]), timeout=300)
                t_indexed = time.monotonic() - started
                _search_modes(api)
                # The vectors have converged; the full-text stage (which now also recounts
                # the batch's contacts once it is searchable) may finish its last batch after.
                assert wait_until(lambda: reconcile(settings).drifted == 0, timeout=120), \
                    reconcile(settings).remaining
                load = Load(ddb, settings.table, emails, text=True, pause_s=0.5)
                searches = Searches(api.url, "semantic", 0.3)
                run = reindex_under_load(searches, load, lambda: ops.reindex_vectors(
                    settings, 32, settle_s=1.0, verify_timeout_s=180, say=say))
                moved = run.report
                names = [moved.old, moved.new]
                assert wait_until(lambda: _converged(settings, ddb, names), timeout=180, interval=2)
                assert admin.state() == (moved.new, moved.old, old)
                searches.assert_never_failed(run.window_s, run.during)
                assert ops.rollback_vectors(settings) == (moved.old, moved.new)
                assert ops.rollback_vectors(settings) == (moved.new, moved.old)
    finally:
        stop_workers(vectors)
    _after(settings, ddb, moved)
    print(f"\nserver path: indexed {FIRST} in {t_indexed:.1f}s; reindex {moved.seconds:.1f}s; "
          f"{searches.issued} searches, {searches.ok} ok; total {time.monotonic() - started:.1f}s")


def _answers(api: Any) -> bool:
    """The API's first semantic search loads its encoder: slow on busy shared cores."""
    try:
        return bool(api.search("release checklist", mode="semantic").status_code == 200)
    except httpx.TimeoutException:
        return False


def _search_modes(api: Any) -> None:
    assert wait_until(lambda: _answers(api), timeout=300, interval=2)
    for mode in ("semantic", "hybrid"):
        answer = api.search("release checklist", mode=mode)
        assert answer.status_code == 200, answer.text
        assert answer.json()["hits"], mode
    first = api.search("release checklist", mode="semantic").json()["hits"][0]
    similar = api.get(f"/v1/mailboxes/{BOX}/messages/{first['message_key']}/similar")
    assert similar.status_code == 200, similar.text
    keys = [r["message_key"] for r in similar.json()["hits"]]
    assert keys and first["message_key"] not in keys


def _after(settings: Settings, ddb: Any, moved: Any) -> None:
    """Both collections match the table; purge empties OTHER everywhere; tenant index."""
    store = build_store(settings)
    try:
        index = VectorIndex(store, settings.qdrant_collection, vector_slug(settings), DIMENSION)
        want = _expected(ddb, settings)
        for name in (moved.old, moved.new):
            got = {p.payload["message_key"]: p.payload["content_hash"]
                   for page in store.scroll(name, match("mailbox_id", BOX), None) for p in page}
            assert got == want, name
        assert store.count(index.alias, match("mailbox_id", OTHER)) > 0
        removed = purge(settings, OTHER)
        assert removed.vector_points > 0
        for name in (moved.old, moved.new):
            assert store.count(name, match("mailbox_id", OTHER)) == 0
        assert store.count(index.alias, match("mailbox_id", BOX)) == len(want)
        schema = store.client.get_collection(moved.new).payload_schema  # type: ignore[attr-defined]
        assert schema["mailbox_id"].params.is_tenant is True
        assert {"thread_key", "message_key", "content_hash"} <= set(schema)
    finally:
        store.close()
