"""Redrive dead letters: decode-stage records (their stripped trigger: keys, event name,
sequence number) go through ingest again; sink-stage entries are resent to their queue. An
entry is removed once resent; a new failure makes a new entry, so nothing is lost either way.
A decode entry without item keys (a line that was not JSON) can never succeed: it is kept and
counted as failed again."""

from __future__ import annotations

from typing import Any

from indexer.adapters import factories
from indexer.adapters.dynamodb.dlq import DeadLetter
from indexer.core.records import RawRecord
from indexer.pipeline.dispatch import celery_send, ingestor
from indexer.settings import Settings


def _has_keys(payload: Any) -> bool:
    ddb = payload.get("dynamodb") if isinstance(payload, dict) else None
    return isinstance(ddb, dict) and isinstance(ddb.get("Keys"), dict)


def redrive(settings: Settings, ids: list[str] | None, *, wait: bool) -> dict[str, Any]:
    store = factories.dead_letters(settings)
    entries: list[DeadLetter] = (
        store.list() if ids is None else [e for i in ids if (e := store.get(i)) is not None]
    )
    run = ingestor(settings)
    send = celery_send(settings)
    pending = []
    hopeless = 0
    for entry in entries:
        if entry.stage == "decode" and not _has_keys(entry.payload):
            hopeless += 1  # no item keys survived (not JSON, no Keys): kept, nothing to send
            continue
        store.remove(entry.id)
        if entry.stage == "decode":
            # The stripped record (keys, event name, sequence number): records are triggers.
            run.feed(RawRecord(entry.source or f"dlq:{entry.id}", entry.payload))
        else:
            pending.append(send(entry.stage, dict(entry.payload)))
    run.flush()
    failed = hopeless
    if wait:
        summary = run.wait()
        failed += summary.dead_lettered
        for result in pending:
            failed += len(result.get(timeout=3600).get("dead_lettered", []))
    return {"redriven": len(entries), "failed_again": failed if wait else None}
