"""A broker that is not a single point (issue 26 part 4): Redis with Sentinel, and the one
Redis behind a stable address (ElastiCache's primary endpoint) restarted.

Real processes throughout: a Sentinel group of this test's own (a primary, a replica, three
Sentinels: ``sidecar_tools.stack.sentinel``) or a private AOF-backed ``redis-server``, never
the shared stack's Redis on 6379; Celery workers and ``sidecar tail`` as subprocesses whose
settings point at it. While messages of a real corpus are written one by one into the mail
table (the stream the tailer follows), the broker is lost — the primary SIGKILLed and the
replica promoted by the Sentinels, or the one Redis SIGKILLed and started again on the same
port and data — and afterwards every message must be in OpenSearch and in Qdrant, nothing
dead-lettered, the tailer alive and checkpointed to the stream's end. The longest stretch
without indexing progress while messages were waiting is printed.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery
from pydantic import SecretStr, ValidationError

from indexer.adapters import broker
from indexer.pipeline.celery_app import configure
from indexer.settings import Settings
from sidecar_tools.stack.sentinel import SentinelStack, free_base
from tests.conftest import CORPORA
from tests.support.waiting import wait_for

FULL_CORPUS = CORPORA / "notmuch-lkml.jsonl.gz"  # 176 real messages, 33 threads
MESSAGES = 90  # its first 90: enough pages to span each outage, and CI-sized (the whole
# corpus took 479 s for this file on a loaded machine)
MAILBOX = "failover"


@functools.cache
def _corpus() -> Path:
    """The first MESSAGES lines of the corpus, as a file the writer reads."""
    out = Path(tempfile.mkdtemp(prefix="failover-")) / f"lkml-{MESSAGES}.jsonl"
    with gzip.open(FULL_CORPUS, "rt", encoding="utf-8") as fh:
        out.write_text("".join(itertools.islice(fh, MESSAGES)), encoding="utf-8")
    return out


# -- settings and configuration (no stack) ------------------------------------------------------


def test_a_sentinel_url_is_taken_apart_and_given_to_celery_whole() -> None:
    settings = Settings(redis_url="sentinel://:p%40ss@h1:26380;sentinel://h2/2",
                        redis_sentinel_master="mymaster",
                        redis_sentinel_password=SecretStr("s3"))
    where = broker.sentinel_address(settings.redis_url)
    assert where.sentinels == (("h1", 26380), ("h2", 26379))
    assert (where.db, where.username, where.password) == (2, None, "p@ss")
    # kombu and Celery read the database and the login from the first part only
    assert broker.celery_url(settings) == (
        "sentinel://:p%40ss@h1:26380/2;sentinel://:p%40ss@h2:26379/2")
    app = Celery("probe")
    configure(app, settings)
    options = app.conf.broker_transport_options
    assert options["master_name"] == "mymaster"
    assert options["sentinel_kwargs"]["password"] == "s3"
    assert app.conf.result_backend_transport_options["master_name"] == "mymaster"
    assert type(app.backend).__name__ == "SentinelBackend"
    # a lost broker is reconnected to for ever, not given up after 100 tries
    assert app.conf.broker_connection_retry and app.conf.broker_connection_max_retries is None


def test_a_plain_url_is_left_alone() -> None:
    settings = Settings(redis_url="rediss://primary.example.cache.amazonaws.com:6379/0")
    assert not settings.redis_sentinel
    assert broker.celery_url(settings) == settings.redis_url
    assert broker.sentinel_options(settings) == {}


def test_a_sentinel_url_needs_the_master_name_and_one_database() -> None:
    with pytest.raises(ValidationError, match="SIDECAR_REDIS_SENTINEL_MASTER"):
        Settings(redis_url="sentinel://h1:26379/0")
    with pytest.raises(ValueError, match="one database"):
        broker.sentinel_address("sentinel://h1:26379/0;sentinel://h2:26379/1")


# -- the stack tests ---------------------------------------------------------------------------


@pytest.fixture
def group(tmp_path: Path) -> Iterator[SentinelStack]:
    stack = SentinelStack(tmp_path / "sentinel", base=free_base())
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


def _on(settings: Settings, group: SentinelStack, **more: Any) -> Settings:
    return settings.model_copy(update={"redis_url": group.url,
                                       "redis_sentinel_master": group.master_name, **more})


def _not_on_the_shared_redis(settings: Settings) -> None:
    from indexer.settings import get_settings

    shared = redis.Redis.from_url(get_settings().redis_url, socket_connect_timeout=2)
    try:
        assert not shared.exists(settings.fulltext_queue, settings.vectors_queue)
        assert not shared.keys(f"{settings.queue_prefix}*")
    finally:
        shared.close()


@pytest.mark.stack
@pytest.mark.slow
def test_the_pipeline_indexes_through_sentinel(
    settings: Settings, group: SentinelStack, tmp_path: Path
) -> None:
    """(a) Real messages through Celery with broker and results on the Sentinel group:
    ``sidecar ingest --wait`` and the workers as processes of their own, configured by the
    environment like in production (this process's Celery app stays on the shared stack)."""
    from indexer.adapters import factories
    from indexer.adapters.dynamodb.dlq import remove_task_results
    from indexer.settings import to_env
    from sidecar_tools.writer.files import load_file
    from tests.support.pipeline_helpers import (
        export_stream,
        opensearch_docs,
        prepare_tables,
        qdrant_points,
        table_messages,
        workers,
    )

    settings = _on(settings, group, batch_messages=16)
    ddb = prepare_tables(settings)
    load_file(ddb, settings.table, _corpus(), MAILBOX)
    records = tmp_path / "stream.jsonl"
    export_stream(settings, records)
    table = table_messages(ddb, settings.table, MAILBOX)
    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"}
    started = time.monotonic()
    with workers(settings):
        done = subprocess.run(
            [sys.executable, "-m", "indexer.cli.main", "ingest", str(records), "--wait",
             "--timeout", "600", "--json"], env=env, capture_output=True, text=True,
            timeout=900, check=False)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    summary = json.loads(next(line for line in reversed(done.stdout.splitlines())
                              if line.startswith("{")))
    print(f"\nsentinel: {summary['read']} records, {summary['batches']} batches, "
          f"{summary['embedded']} embedded in {took:.1f} s")
    assert summary["dead_lettered"] == 0 and summary["resent"] == 0
    assert summary["applied"] + summary["ignored"] == summary["read"]
    assert set(opensearch_docs(settings, MAILBOX)) == set(table)
    want = {k for k, m in table.items() if (m.get("forai") or "").strip()}
    assert {k for _, k in qdrant_points(settings, MAILBOX)} == want
    # everything went through the group's master (and was replicated), nothing to 6379
    client = factories.redis_client(settings)
    assert int(client.info("replication")["connected_slaves"]) == 1
    assert len(client.keys("celery-task-meta-*")) >= 2 * summary["batches"]
    _not_on_the_shared_redis(settings)
    # the gauges and purge read through the same client: the queues drained, the master
    # answered; purge scans the results (none names a dead letter: nothing to remove)
    gauges = {m.name: m.samples for m in broker.QueueCollector(settings).collect()}
    assert gauges["sidecar_redis_up"][0].value == 1
    assert {s.value for s in gauges["sidecar_queue_depth"]} == {0}
    assert remove_task_results(client, MAILBOX) == 0


@dataclass
class _Progress:
    """Messages written so far and indexed so far, sampled together over time."""

    written: int = 0
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, written, indexed)
    errors: list[BaseException] = field(default_factory=list)

    def longest_gap(self, start: float, end: float) -> float:
        """The longest time in [start, end] the indexed count stood still while messages
        were waiting (from the first message indexed on: the encoder's load is not a gap)."""
        gap, since, last = 0.0, None, -1
        for t, written, indexed in self.samples:
            if t < start or t > end:
                continue
            if indexed > last or indexed >= written:
                since = t if indexed > 0 else None
            elif since is not None:
                gap = max(gap, t - since)
            last = indexed
        return gap

    def resumed(self, back: float) -> float:
        """When the indexed count first grew after ``back`` (the broker answering again)."""
        before = max((i for t, _, i in self.samples if t <= back), default=0)
        return next(t for t, _, i in self.samples if t > back and i > before)


def _indexed(settings: Settings) -> int:
    from indexer.adapters import factories

    client = factories.fulltext_index(settings).client
    client.indices.refresh(index=settings.opensearch_index)
    found = client.count(index=settings.opensearch_index, routing=MAILBOX,
                         body={"query": {"term": {"mailbox_id": MAILBOX}}})
    return int(found["count"])


def _writer(ddb: Any, settings: Settings, progress: _Progress, stop: threading.Event) -> None:
    from sidecar_tools.writer.files import Rejected, read_emails
    from sidecar_tools.writer.mapping import to_items
    from sidecar_tools.writer.store import store_message

    try:
        for _, email in read_emails(_corpus()):
            if stop.is_set():
                return
            if isinstance(email, Rejected):
                continue
            store_message(ddb, settings.table, to_items(email, MAILBOX))
            progress.written += 1
            time.sleep(0.05)  # pacing: the writes span the outage (not a wait)
    except BaseException as exc:  # reported by the main thread
        progress.errors.append(exc)


def _monitor(settings: Settings, progress: _Progress, stop: threading.Event) -> None:
    while not stop.is_set():
        written = progress.written
        try:
            indexed = _indexed(settings)
        except Exception as exc:  # OpenSearch is not what this test disturbs
            progress.errors.append(exc)
            return
        progress.samples.append((time.monotonic(), written, indexed))
        stop.wait(0.25)  # the sampling period of the progress curve (not a wait)


@contextmanager
def _workers(settings: Settings, log: Path) -> Iterator[None]:
    """Real Celery workers (one per role, as ``tests.support.pipeline_helpers.workers``), their
    output (INFO: each task received and done) in ``log``."""
    from indexer.pipeline.workers import ROLES, spawn_workers, stop_workers

    with log.open("ab") as out:
        procs = spawn_workers(settings, ROLES, 1, loglevel="INFO", own_session=True, log=out)
        try:
            yield
        finally:
            stop_workers(procs)


def _curve(progress: _Progress, since: float) -> str:
    """The indexed count each time it changed, seconds from ``since``."""
    points, last = [], -1
    for t, _, indexed in progress.samples:
        if indexed != last:
            points.append(f"{t - since:+.1f}s:{indexed}")
            last = indexed
    return " ".join(points)


def _lost_tasks_resent(log: Path) -> int:
    return log.read_text(errors="replace").count("was lost by the broker")


def _index_through_an_outage(
    settings: Settings, tmp_path: Path, outage: Callable[[], str]
) -> None:
    """Tail the corpus being written; ``outage`` disturbs the broker once a third of it is
    indexed and says what it did; then everything must converge, nothing dead-lettered."""
    from indexer.adapters import factories
    from tests.integration.test_tail_redis_restart import (
        _checkpointed_to_the_end,
        _stopped_line,
        _tail_process,
    )
    from tests.support.pipeline_helpers import (
        opensearch_docs,
        prepare_tables,
        qdrant_points,
        table_messages,
    )

    ddb = prepare_tables(settings)
    log = tmp_path / "tail.log"
    progress, stop = _Progress(), threading.Event()
    threads = [threading.Thread(target=_writer, args=(ddb, settings, progress, stop)),
               threading.Thread(target=_monitor, args=(settings, progress, stop))]
    tail: subprocess.Popen[bytes] | None = None
    total = sum(1 for _ in _corpus_messages())
    try:
        with _workers(settings, tmp_path / "workers.log"):
            tail = _tail_process(settings, log)
            for thread in threads:
                thread.start()
            wait_for(lambda: (progress.samples and progress.samples[-1][2] >= total // 3)
                     or progress.errors, timeout=300, interval=0.1,
                     message=lambda: f"{progress.samples[-1:]} {progress.errors}\n"
                     + log.read_text(errors="replace")[-3000:])
            at = progress.samples[-1]
            outage_start = time.monotonic()
            what = outage()
            outage_done = time.monotonic()
            print(f"\n{what} with {at[1]} written and {at[2]} indexed")
            wait_for(lambda: progress.written >= total or progress.errors, timeout=300,
                     message=lambda: f"{progress.written} written, errors {progress.errors}")
            assert not progress.errors, progress.errors

            def converged() -> bool:
                table = table_messages(ddb, settings.table, MAILBOX)
                return len(table) == total and set(opensearch_docs(settings, MAILBOX)) == set(
                    table)

            wait_for(converged, timeout=400, interval=1.0,
                     message=lambda: log.read_text(errors="replace")[-4000:])
            converged_at = time.monotonic()
            took = converged_at - outage_done
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
            assert not progress.errors, progress.errors
            # both stages applied: the checkpoint only advances after the vectors task too
            wait_for(lambda: _checkpointed_to_the_end(settings, ddb), timeout=300, interval=1.0,
                     message=lambda: log.read_text(errors="replace")[-4000:])
            assert tail.poll() is None, "the tailer died:\n" + log.read_text()
            tail.send_signal(signal.SIGTERM)
            assert tail.wait(timeout=120) == 0, log.read_text()
    finally:
        stop.set()
        if tail is not None and tail.poll() is None:
            os.killpg(tail.pid, signal.SIGKILL)
            tail.wait(timeout=10)
    resumed = progress.resumed(outage_done) - outage_start
    before = progress.longest_gap(0.0, outage_start)
    after = progress.longest_gap(outage_start, converged_at)
    print(f"indexing resumed {resumed:.1f} s after the outage began; all {total} messages in "
          f"OpenSearch {took:.1f} s after it ended; longest indexing gap {after:.1f} s "
          f"(before the outage, same run: {before:.1f} s); lost tasks sent again: "
          f"{_lost_tasks_resent(log)}; tail stopped: {_stopped_line(log)['applied']}")
    print(f"indexed over time from the outage: {_curve(progress, outage_start)}")
    # indexing resumed within a minute: nothing waited for the visibility timeout (900 s)
    assert resumed < 60, resumed
    table = table_messages(ddb, settings.table, MAILBOX)
    want = {k for k, m in table.items() if (m.get("forai") or "").strip()}
    assert {k for _, k in qdrant_points(settings, MAILBOX)} == want
    assert factories.dead_letters(settings).list() == []
    _not_on_the_shared_redis(settings)


def _corpus_messages() -> Iterator[Any]:
    from sidecar_tools.writer.files import Rejected, read_emails

    return (e for _, e in read_emails(_corpus()) if not isinstance(e, Rejected))


@pytest.mark.stack
@pytest.mark.slow
def test_a_primary_killed_mid_indexing_loses_nothing(
    settings: Settings, group: SentinelStack, tmp_path: Path
) -> None:
    """(b) The primary SIGKILLed while the tailer indexes; the Sentinels promote the
    replica; the old primary, started again, rejoins as a replica."""
    # The default visibility timeout (900 s): no task the tailer awaits may depend on it.
    settings = _on(settings, group, batch_messages=8)

    def kill_the_primary() -> str:
        old = group.master_port()
        assert old == group.port("r0")
        killed = time.monotonic()
        group.kill("r0")
        new = group.wait_failover(old)
        promoted = time.monotonic() - killed
        group.start("r0")  # the old primary comes back as a replica of the new one
        return f"primary :{old} SIGKILLed, replica :{new} promoted in {promoted:.1f} s"

    _index_through_an_outage(settings, tmp_path, kill_the_primary)
    group.wait_replica("r0")


@pytest.mark.stack
@pytest.mark.slow
def test_one_redis_restarted_mid_indexing_loses_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    """(c) The ElastiCache-like case: one address; the Redis behind it SIGKILLed and started
    again on the same port and AOF data (a failover behind a primary endpoint looks the same
    to the sidecar: connections drop, the same URL answers again)."""
    from tests.integration.test_tail_redis_restart import PrivateRedis

    server = PrivateRedis(tmp_path / "redis")
    server.dir.mkdir()
    server.start()
    settings = settings.model_copy(update={"redis_url": server.url, "batch_messages": 8})

    def restart() -> str:
        assert server.proc is not None
        stopped = time.monotonic()
        server.proc.kill()
        server.proc.wait()
        time.sleep(3.0)  # the outage itself: Redis stays down this long (not a wait)
        server.start()
        return f"redis :{server.port} SIGKILLed and back in {time.monotonic() - stopped:.1f} s"

    try:
        _index_through_an_outage(settings, tmp_path, restart)
    finally:
        server.stop()
