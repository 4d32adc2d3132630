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
the page it was still waiting on, decode and plan), *queue* (published → a worker started it),
*task* (the worker's whole sync: table reads, bulk or upsert, verify, and for vectors the
embedding, which its result reports apart), *visible* (task end → searchable: OpenSearch's
refresh plus the poll). Reads and writes inside a task are not timed apart by anything the
workers report, so they stay one figure.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import logging
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from indexer.settings import Settings, to_env
from sidecar_tools.bench.freshness_probe import ENV as PROBE_ENV
from sidecar_tools.bench.namespaces import own_namespace
from sidecar_tools.bench.timing import percentile

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "demo_data" / "sample-mailbox.jsonl"
MAILBOX = "fresh-{n}@example.org"
WARMUP_MAILBOX = "fresh-warmup@example.org"
TARGETS_S = {"fulltext": 2.0, "vectors": 5.0}  # p99 at 5 messages/s (issue 28 part 3)
TARGET_RATE = 5.0
Ref = tuple[str, str]  # (mailbox_id, message_key)
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


# -- the processes ----------------------------------------------------------------------------

def _probe_argv(argv: list[str]) -> list[str]:
    """``python -m celery ...`` / ``python -m indexer.cli.main ...`` under the probe."""
    probe = [sys.executable, "-m", "sidecar_tools.bench.freshness_probe"]
    if argv[1:3] == ["-m", "celery"]:
        return [*probe, "celery", *argv[3:]]
    return [*probe, "sidecar", *argv]


@dataclass
class Processes:
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        with log.open("ab") as out:
            self.procs.append(subprocess.Popen(argv, env=env, stdout=out, stderr=out,
                                               start_new_session=True))

    def check(self) -> None:
        for proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")

    def stop(self, timeout_s: float = 60.0) -> None:
        for proc in reversed(self.procs):  # the tailer first: it stops sending
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def start_processes(settings: Settings, stage: str, events: Path, log: Path) -> Processes:
    """One worker per queue, then ``sidecar tail``, each under the probe."""
    from indexer.pipeline.workers import ROLES, worker_argv

    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1", PROBE_ENV: str(events)}
    procs = Processes()
    for role in ROLES:
        procs.start(_probe_argv(worker_argv(settings, role, 1, "WARNING")), env, log)
    procs.start(_probe_argv(["tail", "--stage", stage, "--metrics-port", "0"]), env, log)
    return procs


# -- looking for messages in the engines ------------------------------------------------------

class Seen:
    """Messages written and not yet found, and when each was found."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting: set[Ref] = set()
        self.found: dict[Ref, float] = {}

    def add(self, ref: Ref) -> None:
        with self.lock:
            if ref not in self.found:
                self.waiting.add(ref)

    def outstanding(self) -> list[Ref]:
        with self.lock:
            return sorted(self.waiting)

    def mark(self, refs: set[Ref], when: float) -> None:
        with self.lock:
            for ref in refs & self.waiting:
                self.found[ref] = when
                self.waiting.discard(ref)


def _chunks(refs: list[Ref], size: int) -> Iterator[list[Ref]]:
    for i in range(0, len(refs), size):
        yield refs[i:i + size]


def opensearch_finder(settings: Settings) -> Callable[[list[Ref]], set[Ref]]:
    """Which of ``refs`` a search of the alias finds now (refreshed documents only)."""
    from indexer.adapters.opensearch import build_client

    client = build_client(settings)

    def find(refs: list[Ref]) -> set[Ref]:
        hits: set[Ref] = set()
        for part in _chunks(refs, 500):
            body = {
                "size": 10_000,
                "_source": ["mailbox_id", "message_key"],
                "query": {"bool": {"filter": [
                    {"terms": {"mailbox_id": sorted({mb for mb, _ in part})}},
                    {"terms": {"message_key": sorted({mk for _, mk in part})}},
                ]}},
            }
            answer = client.search(index=settings.opensearch_index, body=body)
            hits |= {(h["_source"]["mailbox_id"], h["_source"]["message_key"])
                     for h in answer["hits"]["hits"]}
        return hits & set(refs)

    return find


def qdrant_finder(settings: Settings) -> Callable[[list[Ref]], set[Ref]]:
    """Which of ``refs`` have a point behind the vectors alias of a Qdrant server now."""
    from indexer.adapters.embedder import DIMENSION, MODEL_SLUG
    from indexer.adapters.qdrant import VectorIndex, build_store
    from indexer.core.vectors import Filter, MatchAny

    store = build_store(settings)
    alias = VectorIndex(store, settings.qdrant_collection, MODEL_SLUG, DIMENSION).alias

    def find(refs: list[Ref]) -> set[Ref]:
        if alias not in store.aliases():
            return set()
        hits: set[Ref] = set()
        for part in _chunks(refs, 500):
            flt = Filter(must=(MatchAny("mailbox_id", tuple(sorted({mb for mb, _ in part}))),
                               MatchAny("message_key", tuple(sorted({mk for _, mk in part})))))
            for page in store.scroll(alias, flt, ["mailbox_id", "message_key"]):
                hits |= {(str(p.payload["mailbox_id"]), str(p.payload["message_key"]))
                         for p in page}
        return hits & set(refs)

    return find


def poll(seen: Seen, find: Callable[[list[Ref]], set[Ref]], every_s: float,
         stop: threading.Event, errors: dict[str, int]) -> None:
    while not stop.is_set():
        refs = seen.outstanding()
        if refs:
            try:
                found = find(refs)
            except Exception as exc:  # an engine hiccup costs one poll, counted in the report
                # (before the warm-up message is indexed, the alias does not exist yet)
                name = type(exc).__name__
                errors[name] = errors.get(name, 0) + 1
                found = set()
            seen.mark(found, time.time())
        stop.wait(every_s)


# -- the writer -------------------------------------------------------------------------------

@dataclass
class Written:
    ref: Ref
    due: float  # when the schedule wanted it written (epoch seconds)
    began: float
    ended: float
    has_vector: bool = True  # False: no embedded text (empty subject and forai), no point


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


# -- the events -------------------------------------------------------------------------------

@dataclass
class Task:
    stage: str
    refs: list[Ref]
    published: float | None = None
    started: float | None = None
    ended: float | None = None
    embed_s: float = 0.0


def read_events(path: Path) -> dict[str, Task]:
    """The probe's lines by task id: first publish, first start, first successful end."""
    tasks: dict[str, Task] = {}
    if not path.exists():
        return tasks
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        refs = [(str(r[0]), str(r[1])) for r in ev.get("refs", []) if len(r) >= 2]
        task = tasks.setdefault(ev["id"], Task(ev["stage"], refs))
        if not task.refs:
            task.refs = refs
        t = float(ev["t"])
        if ev["ev"] == "publish" and task.published is None:
            task.published = t
        elif ev["ev"] == "start" and task.started is None:
            task.started = t
        elif ev["ev"] == "end" and task.ended is None and ev.get("state") == "SUCCESS":
            task.ended = t
            task.embed_s = float(ev.get("embed_s") or 0.0)
    return tasks


def first_tasks(tasks: dict[str, Task], stage: str) -> dict[Ref, Task]:
    """Per message, the first task of ``stage`` published naming it."""
    first: dict[Ref, Task] = {}
    ordered = sorted((t for t in tasks.values() if t.stage == stage and t.published is not None),
                     key=lambda t: t.published or 0.0)
    for task in ordered:
        for ref in task.refs:
            first.setdefault(ref, task)
    return first


def first_ends(tasks: dict[str, Task], stage: str) -> dict[Ref, float]:
    """Per message, when the first task of ``stage`` naming it ended."""
    ends: dict[Ref, float] = {}
    for task in tasks.values():
        if task.stage == stage and task.ended is not None:
            for ref in task.refs:
                ends[ref] = min(ends.get(ref, math.inf), task.ended)
    return ends


# -- the figures ------------------------------------------------------------------------------

def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "mean_s": sum(values) / len(values),
            "p50_s": percentile(values, 50), "p95_s": percentile(values, 95),
            "p99_s": percentile(values, 99), "max_s": max(values)}


PAGE_GAP_S = 0.05  # tasks published further apart than this belong to different pages


def busy_until(tasks: dict[str, Task], stage: str, each: bool) -> Callable[[float], float]:
    """For a task published at ``t``: when the tasks of earlier pages had all ended — what the
    tailer waited for before reading on (``--stage all``: both stages' tasks; ``each``: the
    stage's own reader). Pages are told apart by publish time (``PAGE_GAP_S``)."""
    scope = sorted((t.published, t.ended if t.ended is not None else t.published)
                   for t in tasks.values()
                   if t.published is not None and (not each or t.stage == stage))
    published = [p for p, _ in scope]
    running, latest = [], -math.inf
    for _, end in scope:
        latest = max(latest, end)
        running.append(latest)

    def until(t: float) -> float:
        n = bisect.bisect_left(published, t - PAGE_GAP_S)
        return running[n - 1] if n else -math.inf

    return until


def breakdown(written: list[Written], visible: dict[Ref, float], tasks: dict[str, Task],
              stage: str, each: bool = False) -> dict[str, Any]:
    """Per message of ``stage``: total and its parts (see the module docstring)."""
    first = first_tasks(tasks, stage)
    until = busy_until(tasks, stage, each)
    parts: dict[str, list[float]] = {k: [] for k in ("total", "stream", "busy", "queue", "task",
                                                     "embed", "visible")}
    missing = 0
    for w in written:
        if stage == "vectors" and not w.has_vector:
            continue
        seen = visible.get(w.ref)
        if seen is None:
            missing += 1
            continue
        parts["total"].append(seen - w.ended)
        task = first.get(w.ref)
        if task is None or task.published is None:
            continue
        parts["stream"].append(task.published - w.ended)
        parts["busy"].append(min(task.published, max(w.ended, until(task.published)))
                             - w.ended)
        if task.started is not None:
            parts["queue"].append(task.started - task.published)
            if task.ended is not None:
                parts["task"].append(task.ended - task.started)
                parts["visible"].append(seen - task.ended)
                if stage == "vectors":
                    parts["embed"].append(task.embed_s)
    result: dict[str, Any] = {k: stats(v) for k, v in parts.items()
                              if v and (k != "embed" or stage == "vectors")}
    result["not_searchable"] = missing
    batches = [len(t.refs) for t in tasks.values() if t.stage == stage and t.refs]
    result["tasks"] = len(batches)
    result["messages_per_task"] = sum(batches) / len(batches) if batches else 0.0
    return result


# -- the run ----------------------------------------------------------------------------------

def _wait(what: str, ready: Callable[[], bool], timeout_s: float, procs: Processes,
          say: Say) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        procs.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done after {timeout_s:.0f}s")
        time.sleep(0.2)
    say(f"{what}: done")


def run(opts: FreshnessOptions, base: Settings, say: Say) -> dict[str, Any]:
    """One measurement at ``opts.rate`` for ``opts.seconds``; returns the figures."""
    from indexer.adapters import aws
    from indexer.adapters.tables import init_tables

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
    procs = start_processes(settings, opts.stage, events, log)
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
        _wait("warm-up searchable", lambda: not fulltext.waiting and ended_vectors(wrote),
              600, procs, say)
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
            _wait("all searchable", lambda: not fulltext.waiting and ended_vectors(written),
                  opts.drain_s, procs, say)
        except TimeoutError as exc:
            say(str(exc))
        load_after = os.getloadavg()
    finally:
        stop.set()
        procs.stop()
        for thread in pollers:
            thread.join(10)
        if not opts.keep:
            _clean(settings)
    tasks = read_events(events)
    vector_seen = vectors.found if server else first_ends(tasks, "vectors")
    lateness = [w.began - w.due for w in written]
    result: dict[str, Any] = {
        "run_id": run_id,
        "rate": opts.rate,
        "seconds": opts.seconds,
        "stage": opts.stage,
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
        "fulltext": breakdown(written, fulltext.found, tasks, "fulltext", opts.stage == "each"),
        "vectors": breakdown(written, vector_seen, tasks, "vectors", opts.stage == "each"),
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


def _clean(settings: Settings) -> None:
    """Drop the run's index family, tables and embedded store (the events stay)."""
    from indexer.adapters import aws
    from indexer.adapters.opensearch import build_client

    with contextlib.suppress(Exception):  # cleaning is best effort: never hide the figures
        build_client(settings).indices.delete(index=f"{settings.opensearch_index}*",
                                              ignore_unavailable=True, expand_wildcards="all")
    ddb = aws.client(settings, "dynamodb")
    for table in (settings.table, settings.resolved_state_table):
        with contextlib.suppress(Exception):
            ddb.delete_table(TableName=table)
    shutil.rmtree(settings.qdrant_path, ignore_errors=True)


# -- the report -------------------------------------------------------------------------------

PARTS = (("stream", "stream: written → task published"),
         ("busy", "of it: tailer waiting on an earlier page"),
         ("queue", "queue: published → worker starts"),
         ("task", "task: read + bulk/upsert + verify"),
         ("embed", "of it: embedding"),
         ("visible", "task end → searchable (< 0: visible before its verify ended)"))


def _ms(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{value * 1000:,.0f}"


def markdown(results: list[dict[str, Any]]) -> str:
    """The freshness table, the targets and the breakdown of every run."""
    lines = ["| rate (msgs/s) | achieved | index | messages | p50 ms | p95 ms | p99 ms | max ms "
             "| target p99 | met |", "|---:|---:|---|---:|---:|---:|---:|---:|---|---|"]
    for r in results:
        for stage in ("fulltext", "vectors"):
            s = r[stage].get("total", {"n": 0})
            target = TARGETS_S[stage] if r["rate"] == TARGET_RATE else None
            met = "–" if target is None or not s["n"] else (
                "yes" if s["p99_s"] < target and not r[stage]["not_searchable"] else "no")
            goal = f"< {target:g} s" if target else "as measured"
            label = "full text" if stage == "fulltext" else f"vectors ({r['vector_store']})"
            lines.append(
                f"| {r['rate']:g} | {r['achieved_rate']:.2f} | {label} | {s['n']} | "
                f"{_ms(s.get('p50_s'))} | {_ms(s.get('p95_s'))} | {_ms(s.get('p99_s'))} | "
                f"{_ms(s.get('max_s'))} | {goal} | "
                f"{met} |")
    lines += ["", "| rate | index | part | mean ms | p50 ms | p95 ms | p99 ms |",
              "|---:|---|---|---:|---:|---:|---:|"]
    for r in results:
        for stage in ("fulltext", "vectors"):
            for key, label in PARTS:
                s = r[stage].get(key)
                if stage == "vectors" and key == "visible" and r["vector_store"] == "embedded":
                    continue  # the task's end stands in for searchable: 0 by construction
                if s and s["n"]:
                    lines.append(f"| {r['rate']:g} | {stage} | {label} | {_ms(s['mean_s'])} | "
                                 f"{_ms(s['p50_s'])} | {_ms(s['p95_s'])} | {_ms(s['p99_s'])} |")
    lines.append("")
    for r in results:
        lines.append(
            f"- {r['rate']:g}/s: {r['written']} messages in {r['write_s']:.0f}s, tail --stage "
            f"{r['stage']}; full text {r['fulltext']['tasks']} tasks "
            f"({r['fulltext']['messages_per_task']:.1f} msgs each), vectors "
            f"{r['vectors']['tasks']} tasks ({r['vectors']['messages_per_task']:.1f}); write "
            f"call p50 {_ms(r['write_call'].get('p50_s'))} ms, writer late p99 "
            f"{_ms(r['writer_late'].get('p99_s'))} ms; not searchable at the end: full text "
            f"{r['fulltext']['not_searchable']}, vectors {r['vectors']['not_searchable']}; "
            f"load (1 min) {r['load_1m'][0]} → {r['load_1m'][1]} on {r['cpus']} CPUs; "
            f"warning/error lines of the processes: {r['process_warnings']}"
            + (f"; poll errors: {r['poll_errors']}" if r["poll_errors"] else ""))
    return "\n".join(lines)


def met_targets(result: dict[str, Any]) -> dict[str, bool]:
    """The issue's targets (meant for 5 msgs/s): p99 under the limit, every message found."""
    out = {}
    for stage, limit in TARGETS_S.items():
        s = result[stage].get("total", {"n": 0})
        out[stage] = bool(s["n"]) and s["p99_s"] < limit and not result[stage]["not_searchable"]
    return out
