"""The store alone at a freshness run's write rate: how soon a written message's records come
back from the stream, and what the table read a sync task makes costs, with nothing of the
sidecar running — the floor under the stream and task parts of
:mod:`sidecar_tools.bench.freshness` on the same store (moto on the local stack).

The same writer, rate and mail as a freshness run write into a table of the run's own; a
bare reader follows the stream's one shard page after page, reading again 10 ms after an
empty page (no sweep gap, no idle pause, no shard listing, no broker), and notes when the
first page naming each message came back; a second thread reads each written message as a
full-text task's first read does (message, body and participants: ``read_states``), once.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
import uuid
from typing import Any

from indexer.settings import Settings
from sidecar_tools.bench.freshness import FreshnessOptions, Say, emails, write_steadily
from sidecar_tools.bench.freshness_report import Ref, Written, stats
from sidecar_tools.bench.namespaces import own_namespace


def _follow(settings: Settings, arn: str, stop: threading.Event, first: dict[Ref, float],
            calls: dict[str, list[float]]) -> None:
    """Read the stream's shards from their start, as fast as it answers."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.aws.streams import StreamReader
    from sidecar_tools.bench.freshness_phases import messages_of

    reader = StreamReader(aws.client(settings, "dynamodbstreams"))
    iterators = [reader.iterator(arn, s["ShardId"], "TRIM_HORIZON", None)
                 for s in reader.shards(arn)]
    while not stop.is_set():
        empty = True
        for n, it in enumerate(iterators):
            if it is None:
                continue
            began = time.time()
            records, iterators[n] = reader.records(it, 1000)
            now = time.time()
            calls.setdefault("get_records (records)" if records else "get_records (empty)",
                             []).append(now - began)
            for mailbox, key in messages_of(records):
                first.setdefault((mailbox, key), now)
            empty = empty and not records
        if empty:
            stop.wait(0.01)


def _read_each(settings: Settings, todo: queue.Queue[Ref | None],
               calls: dict[str, list[float]]) -> None:
    """One full-text first read (message, body, participants) of each written message."""
    from indexer.adapters import factories
    from indexer.core.plan import MessageRef

    store = factories.store(settings)
    while (ref := todo.get()) is not None:
        began = time.time()
        store.read_states([MessageRef(*ref)], participants=True)
        calls.setdefault("table read (one message)", []).append(time.time() - began)


def run_floor(opts: FreshnessOptions, base: Settings, say: Say) -> dict[str, Any]:
    """The writer at ``opts.rate`` for ``opts.seconds`` and the bare reader; the figures."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.aws.streams import latest_stream_arn
    from indexer.adapters.dynamodb.tables import init_tables

    run_id = uuid.uuid4().hex[:8]
    settings = own_namespace(base, f"floor-{run_id}", opts.workdir / run_id / "qdrant")
    ddb = aws.client(settings, "dynamodb")
    init_tables(ddb, settings, mail_table=True)
    arn = latest_stream_arn(ddb, settings.table)
    count = max(1, math.ceil(opts.rate * opts.seconds))
    mail = emails(opts.corpus, count)
    first: dict[Ref, float] = {}
    calls: dict[str, list[float]] = {}
    stop, todo = threading.Event(), queue.Queue[Ref | None]()
    threads = [threading.Thread(target=_follow, args=(settings, arn, stop, first, calls),
                                daemon=True),
               threading.Thread(target=_read_each, args=(settings, todo, calls), daemon=True)]
    for thread in threads:
        thread.start()
    say(f"floor {run_id}: {count} messages at {opts.rate:g}/s into the store alone")
    try:
        def written_one(w: Written) -> None:
            todo.put(w.ref)

        started = time.time()
        written, failed = write_steadily(ddb, settings.table, mail, opts.rate, opts.writers,
                                         written_one)
        write_s = time.time() - started
        deadline = time.monotonic() + 60
        while any(w.ref not in first for w in written) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        todo.put(None)
        stop.set()
        for thread in threads:
            thread.join(30)
        for table in (settings.table, settings.resolved_state_table):
            with contextlib.suppress(Exception):
                ddb.delete_table(TableName=table)
    return {
        "run_id": run_id, "rate": opts.rate, "seconds": opts.seconds, "written": len(written),
        "write_failures": failed[:5], "write_s": round(write_s, 2),
        "write_call": stats([w.ended - w.began for w in written]),
        "writer_late": stats([w.began - w.due for w in written]),
        "to_read": stats([first[w.ref] - w.ended for w in written if w.ref in first]),
        "never_read": sum(1 for w in written if w.ref not in first),
        "calls": {name: stats(v) for name, v in sorted(calls.items())},
    }


def floor_markdown(result: dict[str, Any]) -> str:
    """The floor's figures as one table."""
    rows = [("store write call (TransactWriteItems)", result["write_call"]),
            ("writer late against its schedule", result["writer_late"]),
            ("written → returned by get_records", result["to_read"]),
            *result["calls"].items()]
    lines = [f"store alone at {result['rate']:g} msgs/s ({result['written']} messages, "
             f"{result['never_read']} never read back)", "",
             "| figure | n | mean ms | p50 ms | p95 ms | p99 ms | max ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, s in rows:
        if s.get("n"):
            lines.append(f"| {name} | {s['n']} | " + " | ".join(
                f"{s[k] * 1000:,.0f}" for k in ("mean_s", "p50_s", "p95_s", "p99_s", "max_s"))
                + " |")
    return "\n".join(lines)
