"""Acceptance: a backfill of a linux-mips-4k export running while the tailer applies deletes and
rewrites of some of the same messages ends with both indexes equal to the table (the suite
runs 400 of its messages; ``SIDECAR_BACKFILL_TAIL_MESSAGES=4000`` runs all of them).

The export is built from the table itself (AWS's FULL layout in moto's S3, via the helpers of
``tests.test_backfill``); its rows are triggers, so a stale row replayed after a live delete or
rewrite must neither resurrect nor overwrite. Run with ``-s`` to see the timings.
"""

from __future__ import annotations

import gzip
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.cli.tail_cmds import build_tailer
from indexer.settings import Settings
from indexer.sources.backfill import BackfillSummary, backfill_export
from sidecar_tools.writer.files import load_file, read_emails
from sidecar_tools.writer.mapping import sha256_hex, to_items
from sidecar_tools.writer.store import delete_message, rewrite_message, store_message
from tests.conftest import CORPORA
from tests.integration.test_backfill import _full_export
from tests.support.pipeline_helpers import (
    embedded_hash,
    prepare_tables,
    qdrant_points,
    table_messages,
    wait_until,
    workers,
)

# linux-mips-4k (4,000 messages, 990 threads, ~87k items) is the size:
# SIDECAR_BACKFILL_TAIL_MESSAGES=4000 passed in 7.8 min on the 2-core machine (backfill 275 s,
# see docs/using/indexing.md, "Backfill"). The suite runs its first 400 messages to keep CI short.
CORPUS = CORPORA / "linux-mips-4k.jsonl.gz"
TOTAL = int(os.environ.get("SIDECAR_BACKFILL_TAIL_MESSAGES", "400"))
BOX = "mips"
DELETES, REWRITES, RESTORES = 8, 8, 2


def _docs(settings: Settings, mailbox: str) -> dict[str, dict[str, Any]]:
    """Every OpenSearch doc of ``mailbox`` by message_key (the shared helper stops at 1,000)."""
    client = factories.fulltext_index(settings).client
    client.indices.refresh(index=settings.opensearch_index)
    body = {
        "query": {"term": {"mailbox_id": mailbox}},
        "size": 10_000,
        "_source": ["message_key", "subject", "spec_version"],
    }
    hits = client.search(index=settings.opensearch_index, body=body, routing=mailbox)
    return {h["_source"]["message_key"]: h["_source"] for h in hits["hits"]["hits"]}


def _view(item: dict[str, Any]) -> tuple[Any, str]:
    return item.get("subject"), item.get("spec_version") or "unknown"


def _converged(settings: Settings, ddb: Any) -> bool:
    try:
        want = {k: _view(m) for k, m in table_messages(ddb, settings.table, BOX).items()}
        have = {k: _view(d) for k, d in _docs(settings, BOX).items()}
    except Exception:
        return False
    return want == have


def _rewritten(email: dict[str, Any], n: int) -> dict[str, Any]:
    meta, content = email["metadata"], email["content"]
    forai = "" if n % 4 == 0 else f"rewritten {n}: {content.get('forAI') or ''}"
    return {
        **email,
        "metadata": {**meta, "subject": "[rewritten] " + (meta.get("subject") or "")},
        "content": {**content, "clean": f"rewritten {n}", "forAI": forai},
        "processing": {**email["processing"], "specVersion": "2.0"},
    }


@pytest.mark.stack
@pytest.mark.slow
def test_backfill_beside_tail_ends_equal_to_the_table(settings: Settings, tmp_path: Path) -> None:
    settings = settings.model_copy(update={"embed_max_tokens": 64, "batch_messages": 128})
    corpus = tmp_path / "corpus.jsonl"
    with gzip.open(CORPUS, "rt", encoding="utf-8") as source:
        corpus.write_text("".join(line for _, line in zip(range(TOTAL), source, strict=False)))
    ddb = prepare_tables(settings)
    start = time.monotonic()
    loaded = load_file(ddb, settings.table, corpus, BOX, atomic=False)
    t_load = time.monotonic() - start
    assert loaded.stored == TOTAL and not loaded.rejected
    emails = [e for _, e in read_emails(corpus) if isinstance(e, dict)]

    mark = time.monotonic()
    uri, _, rows = _full_export(settings, ddb, files=16)
    t_export = time.monotonic() - mark
    print(
        f"\nload {t_load:.1f}s ({loaded.stored} messages), export build {t_export:.1f}s "
        f"({rows} rows)"
    )

    picked = random.Random(7).sample(emails, DELETES + REWRITES)
    deleted, rewritten = picked[:DELETES], picked[DELETES:]
    restored = deleted[:RESTORES]
    ops: list[tuple[str, dict[str, Any]]] = []
    for d, r in zip(deleted, rewritten, strict=True):
        ops += [("delete", d), ("rewrite", r)]
    ops += [("store", e) for e in restored]

    outcome: dict[str, Any] = {}

    def run_backfill() -> None:
        began = time.monotonic()
        try:
            outcome["summary"] = backfill_export(settings, uri, parallel=4, timeout_s=1200)
        except BaseException as exc:  # reported by the main thread
            outcome["error"] = exc
        outcome["seconds"] = time.monotonic() - began

    with workers(settings):
        tailer = build_tailer(settings, "latest", lease_s=10.0, renew_s=2.0)
        stop = threading.Event()
        tail_thread = threading.Thread(target=tailer.run, args=(stop,), daemon=True)
        tail_thread.start()
        try:
            # LATEST is taken when the iterator is first asked for: no write before that.
            assert wait_until(
                lambda: (
                    bool(tailer._shards)
                    and all(s.iterator is not None for s in tailer._shards.values())
                ),
                timeout=60,
                interval=0.1,
            )
            mark = time.monotonic()
            backfill = threading.Thread(target=run_backfill, daemon=True)
            backfill.start()
            during = 0
            for n, (op, email) in enumerate(ops):
                if op == "delete":
                    stored = to_items(email, BOX)
                    assert delete_message(ddb, settings.table, BOX, email["messageId"], stored)
                elif op == "rewrite":
                    assert rewrite_message(ddb, settings.table, to_items(_rewritten(email, n), BOX))
                else:
                    assert store_message(ddb, settings.table, to_items(email, BOX))
                during += backfill.is_alive()
                time.sleep(0.3)  # pacing: the writes spread over the backfill (not a wait)
            backfill.join(timeout=1500)
            assert not backfill.is_alive()
            if "error" in outcome:
                raise outcome["error"]
            summary: BackfillSummary = outcome["summary"]
            t_backfill = time.monotonic() - mark
            assert summary.dead_lettered == 0 and summary.read == rows
            assert wait_until(lambda: _converged(settings, ddb), timeout=600, interval=2.0)
            t_converged = time.monotonic() - mark
        finally:
            stop.set()
            tail_thread.join(timeout=120)
        assert not tail_thread.is_alive() and not tailer.gaps
    print(
        f"backfill {outcome['seconds']:.1f}s (read {summary.read}, applied {summary.applied}, "
        f"embedded {summary.embedded}); {during}/{len(ops)} writes while it ran; "
        f"tailer applied {tailer.applied}; converged {t_converged:.1f}s after start "
        f"(backfill joined at {t_backfill:.1f}s); total {time.monotonic() - start:.1f}s"
    )
    assert during > 0  # the writes raced the backfill

    table = table_messages(ddb, settings.table, BOX)
    gone = {sha256_hex(e["messageId"]) for e in deleted[RESTORES:]}
    assert len(table) == TOTAL - DELETES + RESTORES and not gone & set(table)
    docs = _docs(settings, BOX)
    assert {k: _view(d) for k, d in docs.items()} == {k: _view(m) for k, m in table.items()}
    for email in rewritten:
        assert docs[sha256_hex(email["messageId"])]["subject"].startswith("[rewritten] ")
        assert docs[sha256_hex(email["messageId"])]["spec_version"] == "2.0"
    points = qdrant_points(settings, BOX)
    want = {k: h for k, m in table.items() if (h := embedded_hash(m)) is not None}
    assert set(points) == {(BOX, k) for k in want}
    assert {k: points[(BOX, k)]["content_hash"] for k in want} == want
    assert not gone & {k for _, k in points}
