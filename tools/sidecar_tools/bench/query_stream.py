"""Semantic search through the API while a document stream is being indexed (issue 42).

The encoder alone was measured in one process (:mod:`sidecar_tools.bench.query_load`); this
measures what a user sees: ``clients`` threads sending ``/search?mode=semantic`` to a real
``sidecar serve``, first with nothing being indexed (**quiet**), then for as long again while
the store writer stores new mail at ``rate`` per second and the real processes index it
(**stream**): ``sidecar tail``, the full-text worker, and the vectors consumer of the layout:

- ``edge``: the embedded store; ``sidecar serve`` owns it and consumes the vectors queue
  itself (the default ``--vectors-consumer``), so queries and documents share its process;
- ``server``: a Qdrant server (``SIDECAR_QDRANT_URL``, else one started from
  ``SIDECAR_QDRANT_BIN``), a separate vectors Celery worker, the API only serving.

Everything lives in a namespace of the run's own (table, index, collection, queues), seeded
before measuring with ``seed_messages`` of the corpus in the searched mailbox (fewer where the
corpus is shorter: the rest go to further mailboxes) and indexed by the same processes. The
tailer, the workers and the API run under the freshness probe, so the end of every indexing
task is known and "documents indexed during the window" counts messages whose first task of
each stage ended inside the stream phase. Queries are subject lines of the searched mailbox
(:func:`sidecar_tools.bench.queries.free_text_queries`), the semantic and hybrid mix of the
other benches.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from indexer.settings import Settings
from sidecar_tools.bench import query_stream_report as report
from sidecar_tools.bench.dataset import stored_message
from sidecar_tools.bench.freshness import Say, clean, emails, wait_done, write_steadily
from sidecar_tools.bench.freshness_probe import ENV as PROBE_ENV
from sidecar_tools.bench.freshness_report import Written, first_ends, read_events
from sidecar_tools.bench.freshness_watch import Processes, probe_argv, start_processes
from sidecar_tools.bench.namespaces import own_namespace
from sidecar_tools.bench.queries import free_text_queries
from sidecar_tools.bench.query_load import CORPUS
from sidecar_tools.bench.search import ApiProcess, Workload, api_call, start_api, stop_api
from sidecar_tools.bench.timing import closed_loop
from sidecar_tools.stack.qdrant_server import free_port, server_binary, start_server

LAYOUTS = ("edge", "server")
SEED_RATE = 50.0  # messages/s while seeding (not measured; moto takes it on this machine)
QUERIES = 50


@dataclass
class QueryStreamOptions:
    layout: str = "edge"  # edge | server
    seconds: float = 60.0  # per phase
    rate: float = 5.0  # messages stored per second in the stream phase
    clients: int = 8
    seed_messages: int = 500
    corpus: Path | None = None  # NormalizedEmail JSON lines; default: linux-mips-4k
    workdir: Path = Path(".sidecar/bench/query-stream")
    keep: bool = False  # keep the run's table, index and store afterwards
    seed_timeout_s: float = 900.0


@contextlib.contextmanager
def vector_layout(base: Settings, layout: str, run_dir: Path) -> Iterator[Settings]:
    """``base`` with the layout's vector store: embedded (no URL), or a Qdrant server,
    the configured one or one started for the run (stopped after it)."""
    if layout == "edge":
        yield base.model_copy(update={"qdrant_url": None})
        return
    if base.qdrant_url:
        yield base
        return
    binary = server_binary()
    if binary is None:
        raise RuntimeError("--layout server: set SIDECAR_QDRANT_URL, or SIDECAR_QDRANT_BIN to "
                           "a Qdrant server binary")
    server = start_server(binary, (run_dir / "qdrant-server").resolve())
    try:
        yield base.model_copy(update={"qdrant_url": server.url,
                                      "qdrant_grpc_port": server.grpc_port})
    finally:
        server.stop()


def scrape(url: str) -> str:
    """The API's metrics exposition now."""
    return httpx.get(url, timeout=10).text


def indexed_between(events: Path, refs: set[tuple[str, str]], began: float,
                    ended: float) -> dict[str, int]:
    """Per stage, how many of ``refs`` had their first task of that stage end in the window."""
    tasks = read_events(events)
    return {stage: sum(1 for ref, t in first_ends(tasks, stage).items()
                       if ref in refs and began <= t <= ended)
            for stage in ("fulltext", "vectors")}


def measure(api: ApiProcess, work: Workload, metrics_url: str, clients: int,
            seconds: float) -> dict[str, Any]:
    """One phase of ``clients`` closed-loop semantic searches, with the API's own view."""
    before, load = scrape(metrics_url), os.getloadavg()[0]
    latency = closed_loop(api_call(api, work, "semantic"), work.free_text, clients=clients,
                          seconds=seconds)
    after = scrape(metrics_url)
    return {"api": latency.as_json(), "server_side": report.server_side(before, after),
            "load_1m": [round(load, 2), round(os.getloadavg()[0], 2)]}


class Stack:
    """The layout's processes, all under the probe: tail, workers and the API."""

    def __init__(self, settings: Settings, layout: str, mailbox: str, out: Path) -> None:
        self.events, log = out / "events.jsonl", out / "processes.log"
        roles = ("fulltext",) if layout == "edge" else None  # edge: the API consumes vectors
        self.procs: Processes = start_processes(settings, "all", self.events, log, roles=roles)
        metrics_port = free_port()
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        try:
            self.api = start_api(settings.model_copy(update={"api_metrics_port": metrics_port}),
                                 mailbox, 0, out / "api.log", argv=probe_argv(["serve"]),
                                 env={PROBE_ENV: str(self.events)})
        except BaseException:
            self.procs.stop()
            raise

    def check(self) -> None:
        self.procs.check()
        if self.api.proc.poll() is not None:
            raise RuntimeError(f"the API exited with {self.api.proc.returncode}")

    def stop(self) -> None:
        stop_api(self.api)
        self.procs.stop()


def _seed(settings: Settings, ddb: Any, mail: list[tuple[str, dict[str, Any]]], stack: Stack,
          timeout_s: float, say: Say) -> None:
    """Store ``mail`` and wait until every message's tasks of both stages have ended."""
    written, failed = write_steadily(ddb, settings.table, mail, SEED_RATE, 4, lambda _w: None,
                                     settings.embed_recipe)
    if failed:
        raise RuntimeError(f"seeding failed: {failed[:3]}")

    def done() -> bool:
        tasks = read_events(stack.events)
        text, vectors = first_ends(tasks, "fulltext"), first_ends(tasks, "vectors")
        return all(w.ref in text and (w.ref in vectors or not w.has_vector) for w in written)

    wait_done(f"{len(written)} seed messages indexed", done, timeout_s, stack.check, say)


def _settle(stack: Stack, say: Say, timeout_s: float = 60.0) -> bool:
    """Wait until no task the probe saw is still queued or running (the seed's deferred
    contact recounts included), so the quiet phase is quiet; False: some never ended (a
    failed task ends without success), and the quiet phase ran after ``timeout_s`` anyway."""
    def idle() -> bool:
        return all(task.ended is not None for task in read_events(stack.events).values())

    try:
        wait_done("tasks settled", idle, timeout_s, stack.check, say)
    except TimeoutError as exc:
        say(f"{exc}; measuring anyway")
        return False
    return True


def run(opts: QueryStreamOptions, base: Settings, say: Say) -> dict[str, Any]:
    """Seed, then the quiet and the stream phase; returns the figures ``--json`` writes."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.dynamodb.tables import init_tables

    if opts.layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}")
    logging.getLogger("opensearch").setLevel(logging.ERROR)
    run_id = uuid.uuid4().hex[:8]
    out = (opts.workdir / run_id).resolve()
    out.mkdir(parents=True, exist_ok=True)
    corpus = opts.corpus or CORPUS
    streamed = max(1, math.ceil(opts.rate * opts.seconds))
    mail = emails(corpus, opts.seed_messages + streamed)
    seed, stream = mail[:opts.seed_messages], mail[opts.seed_messages:]
    mailbox = seed[0][0]
    own = [m for mb, e in seed if mb == mailbox and (m := stored_message(mb, e)) is not None]
    work = Workload(mailbox, [], free_text_queries(own, mailbox, QUERIES), [])
    result: dict[str, Any] = {
        "run_id": run_id, "layout": opts.layout, "clients": opts.clients,
        "seconds": opts.seconds, "rate": opts.rate, "corpus": str(corpus),
        "seed_messages": len(seed), "searched_mailbox": mailbox, "searched_messages": len(own),
        "queries": len(work.free_text), "cpus": os.cpu_count(), "notes": list(
            report.notes(opts.layout)),
    }
    with vector_layout(own_namespace(base, f"qstream-{run_id}", out / "qdrant"), opts.layout,
                       out) as settings:
        result["vector_store"] = ("a Qdrant server, a vectors worker of its own"
                                  if settings.qdrant_url
                                  else "embedded, the API consumes the vectors queue")
        ddb = aws.client(settings, "dynamodb")
        stack: Stack | None = None
        try:
            init_tables(ddb, settings, mail_table=True)  # as `sidecar init --mail-table`
            say(f"run {run_id} ({opts.layout}): seeding {len(seed)} messages; logs in {out}")
            stack = Stack(settings, opts.layout, mailbox, out)
            _seed(settings, ddb, seed, stack, opts.seed_timeout_s, say)
            result["settled"] = _settle(stack, say)
            call = api_call(stack.api, work, "semantic")
            for query in work.free_text[:3]:  # warm-up: connections, the query encoder
                call(query)
            say(f"quiet: {opts.clients} clients for {opts.seconds:g}s")
            result["phases"] = {"quiet": measure(stack.api, work, stack.metrics_url,
                                                 opts.clients, opts.seconds)}
            say(f"stream: {len(stream)} messages at {opts.rate:g}/s beside the clients")
            result["phases"]["stream"] = _stream_phase(settings, ddb, stream, stack, work, opts)
            stack.check()
        finally:
            if stack is not None:
                stack.stop()
            if not opts.keep:
                clean(settings)
    return result


def _stream_phase(settings: Settings, ddb: Any, stream: list[tuple[str, dict[str, Any]]],
                  stack: Stack, work: Workload, opts: QueryStreamOptions) -> dict[str, Any]:
    """The writer in a thread, the clients in this one; then what was indexed meanwhile."""
    written: list[Written] = []
    failed: list[str] = []

    def write() -> None:
        done, bad = write_steadily(ddb, settings.table, stream, opts.rate, 4, lambda _w: None,
                                   settings.embed_recipe)
        written.extend(done)
        failed.extend(bad)

    writer = threading.Thread(target=write, name="stream-writer", daemon=True)
    began = time.time()
    writer.start()
    phase = measure(stack.api, work, stack.metrics_url, opts.clients, opts.seconds)
    ended = time.time()
    writer.join(opts.seconds + 60)
    time.sleep(1.0)  # the probe's last lines of tasks that ended in the window
    refs = {w.ref for w in written}
    phase.update({
        "written": len(written), "write_failures": failed[:5],
        "written_with_vector": sum(1 for w in written if w.has_vector),
        "indexed": indexed_between(stack.events, refs, began, ended),
        "window_s": round(ended - began, 2),
    })
    return phase

