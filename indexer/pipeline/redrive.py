"""Redrive dead letters: decode-stage records go through ingest again; sink-stage entries are
resent to their queue as they were. An entry is removed once resent; a new failure makes a
new entry, so nothing is lost either way."""

from __future__ import annotations

from typing import Any

from indexer.adapters.dlq import DeadLetter
from indexer.pipeline import deps
from indexer.pipeline.runner import celery_send, ingestor
from indexer.settings import Settings
from indexer.sources.files import RawRecord, parse_blob


def redrive(settings: Settings, ids: list[str] | None, *, wait: bool) -> dict[str, Any]:
    store = deps.dead_letters(settings)
    entries: list[DeadLetter] = (
        store.list() if ids is None else [e for i in ids if (e := store.get(i)) is not None]
    )
    run = ingestor(settings)
    send = celery_send(settings)
    pending = []
    for entry in entries:
        store.remove(entry.id)
        if entry.stage == "decode":
            source = entry.source or f"dlq:{entry.id}"
            if isinstance(entry.payload, str):  # a line that was not JSON: parse it again
                for item in parse_blob(entry.payload.encode("utf-8", "surrogatepass"), source):
                    run.feed(item)
            else:
                run.feed(RawRecord(source, entry.payload))
        else:
            pending.append(send(entry.stage, dict(entry.payload)))
    run.flush()
    failed = 0
    if wait:
        summary = run.wait()
        failed = summary.dead_lettered
        for result in pending:
            failed += len(result.get(timeout=3600).get("dead_lettered", []))
    return {"redriven": len(entries), "failed_again": failed if wait else None}
