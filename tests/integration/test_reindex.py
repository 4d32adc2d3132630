"""Acceptance: a reindex to a mapping version that adds fields completes under a concurrent
write load with zero drift, and a search issued every 100 ms through the API never fails.

Real stack, no mocks: ``sidecar serve`` (API, owner of the embedded store) and a full-text
worker as subprocesses, the stream tailer in a thread, the writer storing, rewriting and
deleting messages while ``indexer.ops.reindex`` runs in this process. Run with ``-s`` for timings.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import TimeoutError as TaskTimeout

from indexer.adapters.opensearch.family import MAPPING_VERSION, mapping_file
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.cli.tail_cmds import build_tailer
from indexer.ops import reindex as ops
from indexer.ops.reconcile import reconcile
from indexer.settings import Settings
from sidecar_tools.writer.files import read_emails
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import store_message
from tests.support.api_fixtures import start_api
from tests.support.pipeline_helpers import prepare_tables, table_messages, wait_until
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


def _fields(properties: dict[str, Any], prefix: str = "") -> set[str]:
    """Dotted paths of every field and sub-field of a mapping."""
    found: set[str] = set()
    for name, spec in properties.items():
        path = prefix + name
        found.add(path)
        found |= _fields(spec.get("properties", {}), path + ".")
        found |= _fields(spec.get("fields", {}), path + ".")
    return found


def _added_fields(old: int, new: int) -> set[str]:
    def props(v: int) -> dict[str, Any]:
        return dict(mapping_file(v)["template"]["mappings"]["properties"])

    return _fields(props(new)) - _fields(props(old))


def _view(item: dict[str, Any]) -> tuple[Any, str]:
    return item.get("subject"), item.get("spec_version") or "unknown"


def _docs(index: OpenSearchIndex, name: str) -> dict[str, tuple[Any, str]]:
    index.client.indices.refresh(index=name)
    body = {"query": {"term": {"mailbox_id": BOX}}, "size": 1000}
    hits = index.client.search(index=name, body=body)["hits"]["hits"]
    return {h["_source"]["message_key"]: _view(h["_source"]) for h in hits}


def _drift(index: OpenSearchIndex, ddb: Any, settings: Settings, names: list[str]) -> list[str]:
    """Per index, messages missing, extra or stale against the table (empty = no drift)."""
    want = {k: _view(m) for k, m in table_messages(ddb, settings.table, BOX).items()}
    problems = []
    for name in names:
        have = _docs(index, name)
        problems += [f"{name}: missing {k[:8]}" for k in want.keys() - have.keys()]
        problems += [f"{name}: extra {k[:8]}" for k in have.keys() - want.keys()]
        problems += [
            f"{name}: stale {k[:8]}" for k in want.keys() & have.keys() if want[k] != have[k]
        ]
    return problems


@pytest.mark.stack
def test_reindex_under_writes_and_searches(settings: Settings, tmp_path: Path) -> None:
    settings = settings.model_copy(update={"batch_messages": 16, "embed_max_tokens": 64})
    started = time.monotonic()
    ddb = prepare_tables(settings)
    old_version, new_version = 1, MAPPING_VERSION if MAPPING_VERSION > 1 else 2
    added = _added_fields(old_version, new_version)
    assert added, f"mapping v{new_version} adds no field to v{old_version}"
    index = OpenSearchIndex(build_opensearch(settings), settings.opensearch_index)
    old = index.ensure(old_version)  # the live index predates the new mapping
    emails = [e for _, e in read_emails(SAMPLE) if isinstance(e, dict)]
    for email in emails[:FIRST]:
        assert store_message(ddb, settings.table, to_items(email, BOX))
    load, api_cm = Load(ddb, settings.table, emails, pause_s=0.4), contextmanager(start_api)
    with api_cm(settings, tmp_path, BOX, OTHER) as api:
        tailer = build_tailer(settings, "trim_horizon", lease_s=10.0, renew_s=2.0)
        searches, tail_stop = Searches(api.url), threading.Event()
        with running(lambda: tailer.run(tail_stop), tail_stop):
            assert wait_until(lambda: not _drift(index, ddb, settings, [old]), timeout=180)
            t_indexed = time.monotonic() - started
            run = reindex_under_load(searches, load, lambda: ops.reindex(
                settings, new_version, settle_s=1.0, verify_timeout_s=120, say=say))
            report = run.report
            names = [report.old, report.new]
            assert wait_until(lambda: not _drift(index, ddb, settings, names), timeout=60)
    print(
        f"\nindexed {FIRST} in {t_indexed:.1f}s; reindex {report.seconds:.1f}s "
        f"(backfilled {report.backfilled}, counts {report.counts}); load {load.done}; "
        f"{searches.issued} searches issued, {searches.ok} ok, {len(searches.failures)} failed; "
        f"total {time.monotonic() - started:.1f}s"
    )
    searches.assert_never_failed(run.window_s, run.during)
    assert load.done["delete"] and load.done["rewrite"] and load.done["store"]
    assert report.old == old and report.new == index.index_name(new_version)
    assert index.aliases() == {index.alias: [report.new], index.write_alias: [report.old]}
    mapping = index.client.indices.get_mapping(index=report.new)[report.new]["mappings"]
    assert added <= _fields(mapping["properties"])
    assert not (
        added & _fields(index.client.indices.get_mapping(index=old)[old]["mappings"]["properties"])
    )
    assert _drift(index, ddb, settings, names) == []
    # sidecar reconcile reads the alias, now the new index: every field it compares agrees too.
    assert [d for d in reconcile(settings, mailbox=BOX).remaining if d.index == "fulltext"] == []

    assert ops.rollback(settings) == (report.old, report.new)
    assert index.aliases() == {index.alias: [report.old], index.write_alias: [report.new]}
    assert ops.rollback(settings) == (report.new, report.old)  # roll forward again
    assert ops.finish(settings, grace_s=0.0) == report.old
    assert index.aliases() == {index.alias: [report.new], index.write_alias: []}
    assert not index.client.indices.exists(index=report.old)


@pytest.mark.stack
def test_reindex_refuses_what_it_cannot_do(settings: Settings) -> None:
    """Same version, or a kept index not yet finished: refused, and nothing is created."""
    index = OpenSearchIndex(build_opensearch(settings), settings.opensearch_index)
    index.ensure(1)
    with pytest.raises(ops.ReindexError, match="already reads"):
        ops.reindex(settings, 1, settle_s=0)
    index.create_index(2)
    index.client.indices.update_aliases(
        body={"actions": [{"add": {"index": index.index_name(2), "alias": index.write_alias}}]}
    )
    with pytest.raises(ops.ReindexError, match="already names"):
        ops.reindex(settings, 3, settle_s=0)
    assert not index.client.indices.exists(index=index.index_name(3))
    index.client.indices.delete(index=f"{index.alias}-v*")


@pytest.mark.stack
def test_failed_reindex_leaves_the_live_index_alone(settings: Settings) -> None:
    """No worker runs, so the backfill times out: the half-built index leaves the write alias
    and is deleted; searches still read the old index, and a later reindex can start."""
    ddb = prepare_tables(settings)
    email = next(e for _, e in read_emails(SAMPLE) if isinstance(e, dict))
    assert store_message(ddb, settings.table, to_items(email, BOX))
    index = OpenSearchIndex(build_opensearch(settings), settings.opensearch_index)
    old = index.ensure(1)
    with pytest.raises(TaskTimeout):
        ops.reindex(settings, 2, settle_s=0, task_timeout_s=2)
    assert index.aliases() == {index.alias: [old], index.write_alias: []}
    assert not index.client.indices.exists(index=index.index_name(2))
    index.client.indices.delete(index=f"{index.alias}-v*")
