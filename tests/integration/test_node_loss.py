"""Node loss with the real pipeline on the cluster stack (issue 26 part 3).

Three OpenSearch nodes (index: 3 shards x 1 replica, the client given all three nodes) and
three Qdrant nodes (collections: 3 shards x 2 replicas, write consistency 1; the sidecar's one
``SIDECAR_QDRANT_URL`` is ``qd0``). The real pipeline runs as processes: ``sidecar tail`` on
the table's stream, one full-text and one vectors Celery worker, ``sidecar serve``. The store
writer keeps storing and rewriting messages in the moto table; two clients keep searching
through the API, one full-text, one semantic. One at a time, each SIGKILLed and restarted
once the pipeline has caught up: an OpenSearch data node (not the cluster-manager), the
OpenSearch cluster-manager (``_cat/cluster_manager``), a Qdrant node that is not ``qd0``,
``qd0`` itself, the vectors worker; 3 s into each outage, 3 messages already indexed are
deleted.

Asserted: no 5xx and no incomplete answer while a replica could answer (every outage but
``qd0``'s; with ``qd0`` down the semantic searches answer 503: the client knows no other
node); after the restarts both indexes equal the table (no message missing, none stale, no
deleted one back), ``reconcile`` finds no drift, nothing was dead-lettered. Printed (``-s``):
per outage, the requests, 5xx and longest gap between complete answers per search mode, and
when the outage's writes and deletes were in both indexes.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from opensearchpy.exceptions import OpenSearchException
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from indexer.adapters.dynamodb.dlq import dead_letters
from indexer.adapters.embedding.embedder import DIMENSION
from indexer.adapters.factories import vector_slug
from indexer.adapters.opensearch.index import build_client
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.errors import TransientError
from indexer.core.vectors import match
from indexer.ops.reconcile import reconcile
from indexer.pipeline.workers import spawn_workers, stop_workers, workers_of
from indexer.settings import Settings, to_env
from search_api.auth import token_hash
from sidecar_tools.stack import components, opensearch_node
from sidecar_tools.stack.cluster import ClusterStack, free_base
from sidecar_tools.stack.qdrant_server import server_binary
from sidecar_tools.stack.settings import StackSettings
from sidecar_tools.writer.mapping import sha256_hex, to_items
from sidecar_tools.writer.store import delete_message, rewrite_message, store_message
from tests.conftest import namespaced
from tests.support.api_fixtures import TOKEN_A, free_port, mail, serve_process
from tests.support.pipeline_helpers import embedded_hash, prepare_tables, table_messages
from tests.support.waiting import http_ok, wait_for, wait_http_ok, wait_until

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.qdrant_server,
              pytest.mark.skipif(server_binary() is None, reason="no Qdrant server binary")]

BOX = "nodeloss@example.com"
ANCHORS = 20  # never touched by the load: every full-text answer must list all of them
ANCHOR_WORD = "zebrafinch"
OUTAGE_S = 6.0  # from the SIGKILL to the restart (the outage is the test)
BASELINE_S = 5.0  # searches before any outage, for comparison
DELETES = 3  # messages already indexed, deleted during each outage
WRITE_EVERY_S = 0.4  # the store writer's pace
SEARCH_EVERY_S = 0.2  # a searching client's pause between an answer and its next request
REDIS_DB = 11  # the stack's Redis, a database of this test's own (_own_redis_db)
CLUSTER_BASES = (30200, 31200, 27200, 26200)  # away from test_cluster_stack.py's 29200


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterStack]:
    """The cluster stack, owned by this module: down (every node SIGKILLed) at its end."""
    classpath = opensearch_node.prepare(components.opensearch_cache_dir(StackSettings()))
    stack = ClusterStack(Path(tmp_path_factory.mktemp("cluster")), classpath,
                         base=free_base(CLUSTER_BASES),
                         jvm=("-XX:TieredStopAtLevel=1",))  # C1 only: nodes restart faster
    try:
        stack.up(180)
        yield stack
    finally:
        stack.down()


# --- the load: the store writer, and a client searching through the API -----------------------


def _anchor(n: int) -> dict[str, Any]:
    return mail(n, f"{ANCHOR_WORD} anchor report {n}", f"The {ANCHOR_WORD} anchor report {n}.",
                sender=("Anchor", "anchor@example.org"), to=[BOX])


def _note(n: int, version: int = 0) -> dict[str, Any]:
    subject = f"load note {n} v{version}"
    email = mail(n, subject, f"Ordinary note {n}, version {version}, about the harbour.",
                 sender=("Loader", "loader@example.org"), to=[BOX], day=1 + n % 28)
    email["processing"]["specVersion"] = f"1.{version}"
    return email


class Writer:
    """Stores a new message or rewrites a stored one every ``WRITE_EVERY_S`` until stopped;
    :meth:`delete` deletes the oldest stored ones (indexed by then) on the test's call."""

    def __init__(self, ddb: Any, table: str) -> None:
        self.ddb, self.table = ddb, table
        self.live: dict[int, int] = {}  # note number -> its version
        self.deleted: list[int] = []
        self.next, self.lock = 1000, threading.Lock()
        self.stop, self.rng = threading.Event(), random.Random(26)
        self.done = {"store": 0, "rewrite": 0, "delete": 0}

    def step(self) -> None:
        with self.lock:
            if self.live and self.rng.random() < 0.3:
                n = self.rng.choice(sorted(self.live))
                self.live[n] += 1
                assert rewrite_message(self.ddb, self.table, to_items(_note(n, self.live[n]), BOX))
                self.done["rewrite"] += 1
            else:
                n, self.next = self.next, self.next + 1
                assert store_message(self.ddb, self.table, to_items(_note(n), BOX))
                self.live[n] = 0
                self.done["store"] += 1

    def delete(self, count: int) -> list[str]:
        """Delete the ``count`` oldest live notes; their message keys."""
        with self.lock:
            gone = sorted(self.live)[:count]
            for n in gone:
                assert delete_message(self.ddb, self.table, BOX, f"<msg{n}@example.org>")
                del self.live[n]
                self.deleted.append(n)
                self.done["delete"] += 1
        return [sha256_hex(f"<msg{n}@example.org>") for n in gone]

    def snapshot(self) -> tuple[set[str], set[str]]:
        """Message keys stored (anchors too) and deleted so far."""
        with self.lock:
            live = {sha256_hex(f"<msg{n}@example.org>") for n in [*range(ANCHORS), *self.live]}
            return live, {sha256_hex(f"<msg{n}@example.org>") for n in self.deleted}

    def run(self) -> None:
        while not self.stop.wait(WRITE_EVERY_S):  # pacing: the write rate
            self.step()


@dataclass(frozen=True)
class Answer:
    at: float  # monotonic time the answer (or the error) came
    mode: str
    status: int  # 0: no HTTP answer
    complete: bool  # full text: every anchor listed; semantic: a full page of hits


class Searcher:
    """Two clients searching BOX through the API, one full-text and one semantic, each
    sending its next request ``SEARCH_EVERY_S`` after the last answer."""

    def __init__(self, url: str, anchors: set[str]) -> None:
        self.url, self.anchors = url, anchors
        self.answers: list[Answer] = []
        self.stop = threading.Event()

    def _one(self, http: httpx.Client, mode: str) -> Answer:
        q, limit = (ANCHOR_WORD, 100) if mode == "fulltext" else (f"{ANCHOR_WORD} report", 10)
        try:
            r = http.get(f"/v1/mailboxes/{BOX}/search", params={"q": q, "mode": mode,
                                                               "limit": limit})
        except httpx.HTTPError:
            return Answer(time.monotonic(), mode, 0, False)
        keys = {h["message_key"] for h in r.json()["hits"]} if r.status_code == 200 else set()
        complete = keys == self.anchors if mode == "fulltext" else len(keys) == limit
        return Answer(time.monotonic(), mode, r.status_code, complete)

    def client(self, mode: str) -> None:
        headers = {"Authorization": f"Bearer {TOKEN_A}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=30) as http:
            while not self.stop.is_set():
                self.answers.append(self._one(http, mode))  # list.append: thread-safe
                self.stop.wait(SEARCH_EVERY_S)  # pacing: the client's request rate


@dataclass(frozen=True)
class Figures:
    requests: int
    errors_5xx: int
    other_failures: int  # no answer, or a 200 missing something
    longest_gap_s: float  # between complete answers (and from/to the window's ends)


def figures(answers: list[Answer], mode: str, start: float, end: float) -> Figures:
    inside = [a for a in answers if a.mode == mode and start <= a.at <= end]
    good = [a.at for a in inside if a.status == 200 and a.complete]
    marks = [start, *good, end]
    return Figures(len(inside), sum(1 for a in inside if a.status >= 500),
                   sum(1 for a in inside if a.status < 500 and not a.complete),
                   max(b - a for a, b in itertools.pairwise(marks)))


# --- the pipeline as processes ----------------------------------------------------------------


@dataclass
class Pipeline:
    settings: Settings
    env: dict[str, str]
    logs: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str) -> None:
        """``api``, ``tail``, ``fulltext`` or ``vectors``: a process in its own session."""
        log = self.logs / f"{name}.log"
        if name == "api":
            self.procs[name] = serve_process(self.env, log)
            return
        if name == "tail":
            with log.open("ab") as out:
                self.procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "indexer.cli.main", "tail", "--metrics-port", "0"],
                    env=self.env, stdout=out, stderr=out, start_new_session=True)
            return
        with log.open("ab") as out:
            started = spawn_workers(self.settings, (name,), 1, loglevel="WARNING",
                                    own_session=True, log=out)
            self.procs.update(zip(workers_of((name,)), started, strict=True))  # full text: 2

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        stop_workers(list(self.procs.values()))
        self.procs.clear()

    def tail_of(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]


def _own_redis_db(url: str) -> str:
    """The stack's Redis, database ``REDIS_DB``: kombu's ``unacked`` hash is one per database,
    and this test's workers (visibility timeout 15 s) would otherwise restore other tests'
    long-running tasks too."""
    base, _, db = url.rpartition("/")
    return f"{base}/{REDIS_DB}" if url.startswith("redis://") and db.isdigit() else url


def _cluster_settings(cluster: ClusterStack, tmp: Path) -> Settings:
    entry = cluster.qd_port(0)
    return namespaced(
        "nl", tmp, opensearch_url=cluster.opensearch_url, opensearch_shards=3,
        opensearch_replicas=1, qdrant_url=f"http://127.0.0.1:{entry}",
        qdrant_grpc_port=entry + 1, qdrant_shard_number=3, qdrant_replication_factor=2,
        qdrant_write_consistency_factor=1, batch_messages=8, embed_max_tokens=64,
        # a SIGKILLed worker's unacked task comes back within the test; retries of a batch an
        # engine refused are at most 8 s apart (defaults: 900 s and 120 s)
        visibility_timeout_s=15, retry_backoff_max_s=8,
        redis_url=_own_redis_db(Settings().redis_url))


# --- what the engines hold ------------------------------------------------------------------


class Engines:
    """Direct reads of both indexes (not through the pipeline or the API)."""

    def __init__(self, settings: Settings, cluster: ClusterStack) -> None:
        self.settings, self.cluster = settings, cluster
        self.store = build_store(settings)
        self.os = build_client(settings)
        self.vectors = VectorIndex(self.store, settings.qdrant_collection, vector_slug(settings),
                                   DIMENSION)

    def fulltext(self) -> dict[str, dict[str, Any]]:
        """BOX's documents by message key (after a refresh), through all three nodes."""
        index = self.settings.opensearch_index
        self.os.indices.refresh(index=index)
        body = {"query": {"term": {"mailbox_id": BOX}}, "size": 10_000}
        hits = self.os.search(index=index, body=body, routing=BOX)["hits"]["hits"]
        return {h["_source"]["message_key"]: h["_source"] for h in hits}

    def points(self) -> dict[str, dict[str, Any]]:
        return {p.payload["message_key"]: p.payload
                for page in self.store.scroll(self.vectors.alias, match("mailbox_id", BOX), None)
                for p in page}

    def holds(self, live: set[str], deleted: set[str]) -> bool:
        """Both indexes hold every key of ``live`` and none of ``deleted`` (False while one
        does not answer)."""
        try:
            found = (set(self.fulltext()), set(self.points()))
        except (TransientError, OpenSearchException):
            return False
        return all(live <= keys and not keys & deleted for keys in found)

    def os_manager(self) -> str:
        for n in range(3):
            try:
                answer = httpx.get(f"http://127.0.0.1:{self.cluster.os_port(n)}"
                                   "/_cat/cluster_manager?format=json", timeout=5)
                return str(answer.json()[0]["node"])
            except (httpx.HTTPError, ValueError, KeyError, IndexError):
                continue
        raise AssertionError("no OpenSearch node names a cluster-manager")

    def os_layout(self) -> tuple[int, int]:
        found = self.os.indices.get_settings(index=self.settings.opensearch_index)
        index = next(iter(found.values()))["settings"]["index"]
        return int(index["number_of_shards"]), int(index["number_of_replicas"])

    def replica_states(self) -> dict[str, list[str]]:
        """Per collection of this test: the state of each shard replica, as qd0 sees them."""
        client = self.store.client  # type: ignore[attr-defined]
        states: dict[str, list[str]] = {}
        for c in client.get_collections().collections:
            if not c.name.startswith(self.settings.qdrant_collection):
                continue
            info = client.http.distributed_api.collection_cluster_info(c.name).result
            states[c.name] = [str(s.state.value) for s in [*info.local_shards,
                                                           *info.remote_shards]]
        return states

    def qdrant_whole(self) -> bool:
        """Every replica (3 shards x 2) of every collection active (False while qd0 does not
        answer)."""
        try:
            states = self.replica_states()
        except (ResponseHandlingException, UnexpectedResponse):  # qd0 down or starting
            return False
        return bool(states) and all(len(s) == 6 and set(s) == {"Active"}
                                    for s in states.values())


# --- the test -------------------------------------------------------------------------------


@dataclass
class Outage:
    name: str
    what: str
    fulltext: Figures
    semantic: Figures
    down_s: float  # from the SIGKILL until the restarted process was whole again
    indexed_s: float  # from the deletes (mid-outage) until both indexes held every write so far
    during: bool  # ... and that was before the restart
    note: str = ""


@dataclass
class Run:
    """The load, the pipeline and the engines of the test; :meth:`outage` is one node lost."""

    cluster: ClusterStack
    pipeline: Pipeline
    writer: Writer
    searcher: Searcher
    engines: Engines
    outages: list[Outage] = field(default_factory=list)

    def outage(self, name: str, what: str, kill: Callable[[], None],
               restart: Callable[[], None], whole: Callable[[], object]) -> Outage:
        """Once both indexes hold every write so far: SIGKILL; messages deleted 3 s in; the
        restart ``OUTAGE_S`` after the kill; then until ``whole``. Meanwhile, from the deletes
        on: until both indexes hold every write made so far and none of the deleted ones."""
        steady, gone = self.writer.snapshot()  # each outage starts with the pipeline caught up
        wait_for(lambda: self.engines.holds(steady, gone), timeout=120, interval=0.5,
                 message=lambda: f"before {name}: the pipeline is behind\n"
                 + self.pipeline.tail_of("tail") + self.pipeline.tail_of("vectors"))
        start = time.monotonic()
        kill()
        time.sleep(3.0)  # pacing: the outage goes on
        self.writer.delete(DELETES)
        deleted_at = time.monotonic()
        live, deleted = self.writer.snapshot()

        def indexed() -> bool:
            return self.engines.holds(live, deleted)

        during = wait_until(indexed, timeout=OUTAGE_S - 3.0, interval=0.5)
        indexed_at = time.monotonic()
        time.sleep(max(0.0, start + OUTAGE_S - time.monotonic()))  # pacing: the outage goes on
        restart()
        found = whole()
        back = time.monotonic()
        if not during:
            wait_for(indexed, timeout=120, interval=0.5,
                     message=lambda: f"{name}: the pipeline did not catch up\n"
                     + self.pipeline.tail_of("fulltext") + self.pipeline.tail_of("vectors"))
            indexed_at = time.monotonic()
        done = Outage(name, what, figures(self.searcher.answers, "fulltext", start, back),
                      figures(self.searcher.answers, "semantic", start, back), back - start,
                      indexed_at - deleted_at, during, "" if found is None else str(found))
        self.outages.append(done)
        return done

    def os_data_node(self) -> Outage:
        manager = self.engines.os_manager()
        data = next(f"os{n}" for n in range(3) if f"os{n}" != manager)
        return self.outage("opensearch data node", f"{data} (cluster-manager: {manager})",
                           lambda: self.cluster.kill(data), lambda: self.cluster.start(data),
                           lambda: self.cluster.wait_green(180))

    def os_manager(self) -> Outage:
        manager = self.engines.os_manager()
        elected: list[str] = []

        def killed() -> None:
            self.cluster.kill(manager)
            elected.append(wait_for(lambda: _other_manager(self.engines, manager), timeout=60,
                                    message="no new cluster-manager elected"))

        def whole() -> str:
            self.cluster.wait_green(180)
            return f"new cluster-manager {elected[0]}"

        return self.outage("opensearch cluster-manager", manager, killed,
                           lambda: self.cluster.start(manager), whole)

    def qdrant_node(self, n: int) -> Outage:
        """``qd{n}``; whole: it answers ready and every replica is active again. ``qd0`` is
        the node the sidecar talks to (its one ``SIDECAR_QDRANT_URL``)."""
        name, dead = f"qd{n}", list[int]()

        def restart() -> None:
            if n:  # qd0 is down: it is also the node asked
                dead.append(sum(s.count("Dead") for s in self.engines.replica_states().values()))
            self.cluster.start(name)

        def whole() -> str:
            wait_for(lambda: http_ok(f"http://127.0.0.1:{self.cluster.qd_port(n)}/readyz")
                     and self.engines.qdrant_whole(), timeout=120, interval=0.5,
                     message=lambda: f"{name} did not rejoin: {self.engines.replica_states()}")
            return f"{dead[0]} of 12 replicas Dead before the restart" if dead else ""

        what = "the node the sidecar talks to" if n == 0 else "the sidecar talks to qd0"
        return self.outage("qdrant entry node" if n == 0 else "qdrant node", f"{name} ({what})",
                           lambda: self.cluster.kill(name), restart, whole)

    def worker(self) -> Outage:
        return self.outage("vectors worker", "the `--role vectors` Celery worker",
                           lambda: self.pipeline.kill("vectors"),
                           lambda: self.pipeline.start("vectors"), lambda: None)


def test_node_loss_under_the_pipeline(cluster: ClusterStack, tmp_path: Path) -> None:
    began = time.monotonic()
    settings = _cluster_settings(cluster, tmp_path)
    ddb = prepare_tables(settings)
    for n in range(ANCHORS):
        assert store_message(ddb, settings.table, to_items(_anchor(n), BOX))
    anchors = {sha256_hex(f"<msg{n}@example.org>") for n in range(ANCHORS)}
    port = free_port()
    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1",
           "SIDECAR_API_PORT": str(port),
           "SIDECAR_API_TOKENS": json.dumps({token_hash(TOKEN_A): [BOX]})}
    pipeline = Pipeline(settings, env, tmp_path)
    writer, searcher = Writer(ddb, settings.table), Searcher(f"http://127.0.0.1:{port}", anchors)
    threads = [threading.Thread(target=writer.run, daemon=True),
               *(threading.Thread(target=searcher.client, args=(mode,), daemon=True)
                 for mode in ("fulltext", "semantic"))]
    try:
        for name in ("fulltext", "vectors", "tail", "api"):
            pipeline.start(name)
        wait_http_ok(f"http://127.0.0.1:{port}/readyz", timeout=180, proc=pipeline.procs["api"],
                     log=tmp_path / "api.log", what="the API")
        engines = Engines(settings, cluster)
        wait_for(lambda: engines.holds(anchors, set()), timeout=180, interval=0.5,
                 message=lambda: "anchors not indexed\n" + pipeline.tail_of("vectors"))
        layout = engines.os_layout(), engines.replica_states()
        assert layout[0] == (3, 1)  # shards, replicas
        assert len(layout[1]) == 2 and all(len(s) == 6 for s in layout[1].values()), layout
        for thread in threads:
            thread.start()
        wait_for(lambda: len(writer.live) >= 5 and len(searcher.answers) >= 10, timeout=60,
                 message="the load did not start")
        warm = time.monotonic()
        time.sleep(BASELINE_S)  # pacing: a window without an outage, for comparison
        baseline = (figures(searcher.answers, "fulltext", warm, time.monotonic()),
                    figures(searcher.answers, "semantic", warm, time.monotonic()))
        run = Run(cluster, pipeline, writer, searcher, engines)
        run.os_data_node()
        run.os_manager()
        run.qdrant_node(2)
        entry = run.qdrant_node(0)
        run.worker()
        writer.stop.set()
        threads[0].join(timeout=30)
        live, deleted = writer.snapshot()
        converging = time.monotonic()
        wait_for(lambda: _converged(engines, ddb, settings, live, deleted), timeout=180,
                 interval=0.5, message="the indexes did not converge on the table")
        converged_s = time.monotonic() - converging
    finally:
        writer.stop.set()
        searcher.stop.set()
        for thread in threads:
            if thread.ident is not None:  # started
                thread.join(timeout=60)
        pipeline.stop()
    report = reconcile(settings, BOX)
    letters = dead_letters(settings).count()
    _print(run.outages, baseline, writer, warm - began, converged_s, time.monotonic() - began)
    print(f"  reconcile: found {len(report.found)}, drifted {report.drifted}; "
          f"dead letters {letters}")
    assert len(report.found) == 0 and report.drifted == 0, report.to_json()["drift"]
    assert letters == 0
    for o in run.outages:  # no 5xx and no incomplete answer while a replica could answer
        assert (o.fulltext.errors_5xx, o.fulltext.other_failures) == (0, 0), o
        if o is not entry:
            assert (o.semantic.errors_5xx, o.semantic.other_failures) == (0, 0), o
    # The entry node lost: no node answers the API's vector reads until it is back (503s);
    # the vectors tasks wait for it (retried, never dead-lettered: asserted above).
    assert entry.semantic.errors_5xx > 0 and entry.semantic.longest_gap_s >= OUTAGE_S - 1


def _other_manager(engines: Engines, old: str) -> str:
    """The cluster-manager's name once it is not ``old`` ("" until then)."""
    try:
        found = engines.os_manager()
    except AssertionError:
        return ""
    return found if found != old else ""


def _converged(engines: Engines, ddb: Any, settings: Settings, live: set[str],
               deleted: set[str]) -> bool:
    """Both indexes equal the table: the same keys, the table's subject in OpenSearch, the
    table's content hash on each point; the table holds exactly ``live``."""
    table = table_messages(ddb, settings.table, BOX)
    if set(table) != live:
        raise AssertionError(f"the table holds {len(table)} messages, the writer {len(live)}")
    docs, points = engines.fulltext(), engines.points()
    if set(docs) != live or set(points) != {k for k, m in table.items()
                                            if embedded_hash(m) is not None}:
        return False
    assert not (set(docs) | set(points)) & deleted
    return all(docs[k]["subject"] == m["subject"] and points[k]["content_hash"]
               == embedded_hash(m) for k, m in table.items())


def _print(outages: list[Outage], baseline: tuple[Figures, Figures], writer: Writer,
           ready_s: float, converged_s: float, elapsed_s: float) -> None:
    print(f"\nnode loss: load under way {ready_s:.0f} s after the start; writes {writer.done}; "
          f"converged {converged_s:.1f} s after the last write; total {elapsed_s:.0f} s")
    ft, sem = baseline
    print(f"  {'no outage':27} {BASELINE_S:4.1f} s | fulltext {ft.requests} req, gap "
          f"{ft.longest_gap_s:.2f} s | semantic {sem.requests} req, gap {sem.longest_gap_s:.2f} s")
    for o in outages:
        ft, sem = o.fulltext, o.semantic
        when = "during the outage" if o.during else "after the restart"
        print(f"  {o.name:27} {o.what}: down {o.down_s:.1f} s; the outage's writes and "
              f"deletes indexed {o.indexed_s:.1f} s after the deletes ({when}) | fulltext "
              f"{ft.requests} req, {ft.errors_5xx} 5xx, {ft.other_failures} other, gap "
              f"{ft.longest_gap_s:.2f} s | semantic {sem.requests} req, {sem.errors_5xx} 5xx, "
              f"{sem.other_failures} other, gap {sem.longest_gap_s:.2f} s | {o.note}")
