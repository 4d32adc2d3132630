"""Freshness: how long a stored message takes to become searchable through ``sidecar tail``.

A steady, open-loop write rate (message *i* is due at ``t0 + i / rate``, whatever the earlier
writes took) goes through the store writer into a table of the run's own; the real processes
follow it: ``sidecar tail`` reads the table's stream and dispatches to one Celery worker per
queue, which index OpenSearch and the vector store. Per message, in wall-clock time (one
host, one clock):

- **written**: the writer's ``store_message`` returned (the transaction is committed);
- **full-text searchable**: the first search (``_search`` on the run's alias, so only what a
  refresh made visible) that finds it; polled every ``poll_s`` for every message written and
  not yet found, so the figure is late by at most one poll;
- **vector searchable**: with a Qdrant server (``SIDECAR_QDRANT_URL``), the first filtered
  scroll of the alias that finds its point, polled likewise; with the embedded store (the
  default) no other process can open it, so the end of the vectors task that wrote the point
  stands in for it (Edge serves a point to its owner as soon as the upsert returns, and the
  task flushes before it ends).

The breakdown comes from Celery's own signals, recorded in the tailer and the workers by
:mod:`sidecar_tools.bench.freshness_probe`, and from the tasks' own results: *stream* (written →
the tailer published the first task naming the message: the stream, the tailer's idle poll,
the gap between its sweeps, decode and plan), *queue* (published → a worker started it),
*task* (the worker's whole sync: table reads, bulk or upsert, verify, and for vectors the
embedding, which its result reports apart), *visible* (task end → searchable: OpenSearch's
refresh plus the poll). Reads and writes inside a task are not timed apart by anything the
workers report, so they stay one figure.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import queue
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer.pipeline.workers import DEFAULT_CONCURRENCY
from indexer.settings import Settings
from sidecar_tools.bench.freshness_report import (
    Written,
    breakdown,
    first_ends,
    read_events,
    stats,
    stream_calls,
    task_times,
)
from sidecar_tools.bench.freshness_watch import (
    Seen,
    opensearch_finder,
    poll,
    qdrant_finder,
    start_processes,
)
from sidecar_tools.bench.namespaces import own_namespace

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "demo_data" / "sample-mailbox.jsonl"
MAILBOX = "fresh-{n}@example.org"
WARMUP_MAILBOX = "fresh-warmup@example.org"
Say = Callable[[str], None]


@dataclass
class FreshnessOptions:
    rate: float = 5.0  # messages stored per second
    seconds: float = 120.0  # how long the writer writes
    corpus: Path | None = None  # NormalizedEmail JSON lines; default: the shipped demo mailbox
    stage: str = "all"  # `sidecar tail --stage`
    writers: int = 4  # writer threads (open loop: a slow write never delays the next one)
    poll_s: float = 0.1  # how often outstanding messages are looked for in the engines
    drain_s: float = 600.0  # after the last write, how long to wait for the stragglers
    workdir: Path = Path(".sidecar/bench/freshness")
    keep: bool = False  # keep the run's table, index and store afterwards
    fulltext_concurrency: int | None = None  # full-text worker processes (None: the default)
    ablate: str = ""  # "contacts": the full-text task keeps no contact summary (measurement)


# -- the mail ---------------------------------------------------------------------------------

def emails(path: Path | None, count: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` (mailbox, email) pairs; past the corpus's end it is replayed into further
    mailboxes with `` (copy k)`` appended to subject and forAI, so every text is new to the
    embedding cache (a replayed text would cost a cache lookup instead of an embedding)."""
    from sidecar_tools.writer.files import Rejected, read_emails

    found = [e for _, e in read_emails(path or DEMO_CORPUS)
             if not isinstance(e, Rejected) and isinstance(e, dict)]
    if not found:
        raise ValueError(f"no valid email in {path or DEMO_CORPUS}")
    chosen: list[tuple[str, dict[str, Any]]] = []
    for n in range(count):
        copy, email = divmod(n, len(found))[0], found[n % len(found)]
        chosen.append((MAILBOX.format(n=copy), _copied(email, copy)))
    return chosen


def _copied(email: dict[str, Any], copy: int) -> dict[str, Any]:
    if copy == 0:
        return email
    mark = f" (copy {copy})"
    meta = dict(email.get("metadata") or {})
    content = dict(email.get("content") or {})
    if isinstance(meta.get("subject"), str):
        meta["subject"] += mark
    if isinstance(content.get("forAI"), str):
        content["forAI"] += mark
    return {**email, "metadata": meta, "content": content}


# -- the writer -------------------------------------------------------------------------------

def write_steadily(
    ddb: Any, table: str, mail: list[tuple[str, dict[str, Any]]], rate: float, writers: int,
    on_written: Callable[[Written], None], recipe: Any = None,
) -> tuple[list[Written], list[str]]:
    """Store ``mail`` at ``rate`` per second, open loop, from ``writers`` threads.

    A thread's messages always go to the same writer, in order: two transactions on one THREAD
    item at once make one of them fail its guard and be retried, and the local stack's moto
    launcher (``sidecar_tools.stack.moto_server``) rolls a failed transaction back by cutting
    the stream at its length before the transaction — dropping the records that other
    writers' transactions appended meanwhile (seen here: two messages stored, never streamed).
    """
    from indexer.core.recipes import DEFAULT_RECIPE, embedded_text
    from sidecar_tools.writer.mapping import to_items
    from sidecar_tools.writer.store import store_message

    done: list[Written] = []
    failed: list[str] = []
    lock = threading.Lock()

    def one(mailbox: str, items: Any, due: float) -> None:
        try:
            began = time.time()
            stored = store_message(ddb, table, items)
            ended = time.time()
        except Exception as exc:
            with lock:
                failed.append(f"{mailbox}: {type(exc).__name__}: {exc}"[:200])
            return
        row = items.message
        wrote = Written((mailbox, items.message_key), due, began, ended, embedded_text(
            recipe or DEFAULT_RECIPE, row.get("subject"), row.get("forai")) is not None)
        with lock:
            if stored:
                done.append(wrote)
            else:
                failed.append(f"{mailbox}/{items.message_key}: already stored")
        if stored:
            on_written(wrote)

    lanes: list[queue.Queue[tuple[str, Any, float] | None]] = [
        queue.Queue() for _ in range(max(1, writers))]

    def lane(q: queue.Queue[tuple[str, Any, float] | None]) -> None:
        while (job := q.get()) is not None:
            one(*job)

    threads = [threading.Thread(target=lane, args=(q,), name=f"writer-{n}", daemon=True)
               for n, q in enumerate(lanes)]
    for thread in threads:
        thread.start()
    start = time.time() + 0.2
    for n, (mailbox, email) in enumerate(mail):
        due = start + n / rate
        try:
            items = to_items(email, mailbox)
        except Exception as exc:
            failed.append(f"{mailbox}: {type(exc).__name__}: {exc}"[:200])
            continue
        time.sleep(max(0.0, due - time.time()))
        pick = int(hashlib.sha256(items.thread.pk.encode()).hexdigest()[:8], 16) % len(lanes)
        lanes[pick].put((mailbox, items, due))
    for q in lanes:
        q.put(None)
    for thread in threads:
        thread.join()
    return done, failed


# -- the run ----------------------------------------------------------------------------------

def wait_done(what: str, ready: Callable[[], bool], timeout_s: float,
              check: Callable[[], None], say: Say) -> None:
    """Poll ``ready`` until it holds, calling ``check`` between polls (it raises when a
    process the run needs has exited: a dead worker must not pass for a slow one)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done after {timeout_s:.0f}s")
        time.sleep(0.2)
    say(f"{what}: done")


def run(opts: FreshnessOptions, base: Settings, say: Say) -> dict[str, Any]:
    """One measurement at ``opts.rate`` for ``opts.seconds``; returns the figures."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.dynamodb.tables import init_tables

    logging.getLogger("opensearch").setLevel(logging.ERROR)  # the alias's 404s before it exists
    run_id = uuid.uuid4().hex[:8]
    settings = own_namespace(base, f"fresh-{run_id}", opts.workdir / run_id / "qdrant")
    out = (opts.workdir / run_id).resolve()
    out.mkdir(parents=True, exist_ok=True)
    events, log = out / "events.jsonl", out / "processes.log"
    count = max(1, math.ceil(opts.rate * opts.seconds))
    mail = emails(opts.corpus, count + 1)
    warmup, mail = (WARMUP_MAILBOX, mail[0][1]), mail[1:]
    ddb = aws.client(settings, "dynamodb")
    init_tables(ddb, settings, mail_table=True)  # as `sidecar init --mail-table`
    server = bool(settings.qdrant_url)
    say(f"run {run_id}: {count} messages at {opts.rate:g}/s, tail --stage {opts.stage}, "
        f"vectors {'on a Qdrant server' if server else 'embedded'}; processes log {log}")
    procs = start_processes(settings, opts.stage, events, log,
                            fulltext_concurrency=opts.fulltext_concurrency, ablate=opts.ablate)
    load_before = os.getloadavg()
    fulltext, vectors = Seen(), Seen()
    stop = threading.Event()
    errors: dict[str, int] = {}

    def written_one(w: Written) -> None:
        fulltext.add(w.ref)
        if server and w.has_vector:
            vectors.add(w.ref)

    pollers = [threading.Thread(target=poll, args=(fulltext, opensearch_finder(settings),
                                                   opts.poll_s, stop, errors), daemon=True)]
    if server:
        pollers.append(threading.Thread(target=poll, args=(vectors, qdrant_finder(settings),
                                                           opts.poll_s, stop, errors),
                                        daemon=True))
    for thread in pollers:
        thread.start()

    def ended_vectors(written: list[Written]) -> bool:
        refs = [w.ref for w in written if w.has_vector]
        if server:
            return not any(r in vectors.waiting for r in refs)
        ends = first_ends(read_events(events), "vectors")
        return all(r in ends for r in refs)

    try:
        # Warm-up (not measured): the workers load the model, the index and the store are
        # created and the tailer holds its lease before the clock starts.
        wrote, failed = write_steadily(ddb, settings.table, [warmup], 1.0, 1, written_one,
                                       settings.embed_recipe)
        if failed:
            raise RuntimeError(f"warm-up write failed: {failed}")
        wait_done("warm-up searchable", lambda: not fulltext.waiting and ended_vectors(wrote),
                  600, procs.check, say)
        errors.clear()  # the alias did not exist until the warm-up message was indexed
        written_from = time.time()
        say(f"writing {count} messages at {opts.rate:g}/s")
        written, failed = write_steadily(
            ddb, settings.table, mail, opts.rate, opts.writers, written_one,
            settings.embed_recipe)
        write_s = time.time() - written_from
        say(f"wrote {len(written)} in {write_s:.1f}s ({len(failed)} failed); waiting for the "
            "indexes")
        try:
            wait_done("all searchable",
                      lambda: not fulltext.waiting and ended_vectors(written),
                      opts.drain_s, procs.check, say)
        except TimeoutError as exc:
            say(str(exc))
        load_after = os.getloadavg()
    finally:
        stop.set()
        procs.stop()
        for thread in pollers:
            thread.join(10)
        if not opts.keep:
            clean(settings)
    tasks = read_events(events)
    calls = stream_calls(events)
    vector_seen = vectors.found if server else first_ends(tasks, "vectors")
    lateness = [w.began - w.due for w in written]
    result: dict[str, Any] = {
        "run_id": run_id,
        "rate": opts.rate,
        "seconds": opts.seconds,
        "stage": opts.stage,
        "fulltext_concurrency": opts.fulltext_concurrency or DEFAULT_CONCURRENCY["fulltext"],
        "ablate": opts.ablate,
        "corpus": str(opts.corpus or DEMO_CORPUS),
        "vector_store": "server" if server else "embedded",
        "vector_searchable": "polled" if server else "vectors task end",
        "poll_s": opts.poll_s,
        "written": len(written),
        "write_failures": failed[:5],
        "write_s": round(write_s, 2),
        "achieved_rate": len(written) / write_s if write_s > 0 else 0.0,
        "write_call": stats([w.ended - w.began for w in written]),
        "writer_late": stats(lateness),
        "fulltext": breakdown(written, fulltext.found, tasks, "fulltext", calls.first_read),
        "vectors": breakdown(written, vector_seen, tasks, "vectors", calls.first_read),
        "stream_calls": {name: stats(v) for name, v in sorted(calls.seconds.items())},
        "contacts": task_times(tasks, "contacts"),
        "load_1m": [round(load_before[0], 2), round(load_after[0], 2)],
        "cpus": os.cpu_count(),
        "poll_errors": dict(errors),
        "process_warnings": _warnings(log),
    }
    return result


def _warnings(log: Path) -> int:
    """Warning and error lines of the processes (a stack restarted under the run shows here)."""
    if not log.exists():
        return 0
    text = log.read_text(encoding="utf-8", errors="replace")
    return sum(1 for line in text.splitlines()
               if ('"level": "warning"' in line or '"level": "error"' in line)
               and "DeprecationWarning" not in line)


def clean(settings: Settings) -> None:
    """Drop the run's index family, tables, and embedded store or its collections on a Qdrant
    server (the events stay)."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.opensearch.index import build_client
    from indexer.adapters.qdrant.index import build_store

    if settings.qdrant_url:  # a server outlives the run: what the run made on it goes
        with contextlib.suppress(Exception):
            store, name = build_store(settings), settings.qdrant_collection
            store.set_aliases({a: None for a in store.aliases() if a.startswith(name)})
            for collection in sorted(c for c in store.collections() if c.startswith(name)):
                store.drop(collection)
            store.close()

    with contextlib.suppress(Exception):  # cleaning is best effort: never hide the figures
        build_client(settings).indices.delete(index=f"{settings.opensearch_index}*",
                                              ignore_unavailable=True, expand_wildcards="all")
    ddb = aws.client(settings, "dynamodb")
    for table in (settings.table, settings.resolved_state_table):
        with contextlib.suppress(Exception):
            ddb.delete_table(TableName=table)
    shutil.rmtree(settings.qdrant_path, ignore_errors=True)
