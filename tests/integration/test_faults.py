"""Fault tolerance under a steady write load (issue: operations, part 5).

With ``sidecar tail --stage each`` and both Celery workers running as real processes and a writer storing,
rewriting and deleting mail on two mailboxes the whole time, each fault in turn:

1. OpenSearch stopped for ``SIDECAR_FAULT_OUTAGE_S`` (default 60) seconds — embedding keeps
   going meanwhile (the vectors reader's durable checkpoint advances) and the queues stay
   bounded (each reader waits for its page: the tailer slows down instead of filling Redis);
2. the Qdrant store made unavailable (embedded mode: the process that owns the store frozen
   with SIGSTOP; no Qdrant server runs here) — full text keeps going meanwhile;
3. Redis restarted;
4. the vectors worker SIGKILLed (and started again);
5. the tailer SIGKILLed (and started again: it takes over once the lease expires).

After each: the full-text index equals the table and both stream readers' checkpoints stand at
the stream's end. At the end ``reconcile`` reports zero drift in both indexes and the dead-letter
store is empty. OpenSearch and Redis are private processes of this test, so stopping them
disturbs nothing else.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from indexer.settings import Settings
from tests.integration.test_tail_redis_restart import (
    MAILBOXES,
    PrivateRedis,
    _checkpointed_to_the_end,
    _converged,
    _tail_process,
)
from tests.support.api_fixtures import free_port
from tests.support.waiting import wait_for

# One reader per index (`--stage each`): an index that is down holds back only its own reader.
EACH = ("fulltext", "vectors")
OUTAGE_S = float(os.environ.get("SIDECAR_FAULT_OUTAGE_S", "60"))


class PrivateOpenSearch:
    """A one-node OpenSearch of the stack's launcher on its own port and data; restartable."""

    def __init__(self, home: Path) -> None:
        self.home, self.port = home, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        from sidecar_tools.stack import opensearch_node
        from sidecar_tools.stack.components import _opensearch_probe, opensearch_cache_dir

        classpath = opensearch_node.prepare(opensearch_cache_dir(Settings()))
        argv = opensearch_node.command(classpath, self.home, self.port, "fault-test", "384m")
        with (self.home / "node.log").open("ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        proc, log = self.proc, self.home / "node.log"

        def answers() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            return bool(_opensearch_probe(self.url))

        wait_for(answers, timeout=180, interval=0.5, message="private OpenSearch did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class WriteLoad:
    """Stores, rewrites and deletes mail on both mailboxes until stopped; pausable."""

    def __init__(self, ddb: Any, table: str) -> None:
        self.ddb, self.table = ddb, table
        self.running = threading.Event()
        self.stopped = threading.Event()
        self.errors: list[BaseException] = []
        self.done = 0
        self._writing = threading.Lock()  # held for each write: ``paused`` waits on it
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        from tests.integration.test_tail import _write

        rng = random.Random(11)
        while not self.stopped.is_set():
            if not self.running.wait(timeout=0.2):
                continue
            op = rng.choice(["store", "store", "rewrite", "delete"])
            with self._writing:
                if not self.running.is_set():  # paused meanwhile: no write starts now
                    continue
                try:
                    _write(self.ddb, self.table, op, rng.randrange(9), rng.choice(MAILBOXES),
                           variant=rng.randrange(3))
                    self.done += 1
                except BaseException as exc:  # reported by the test
                    self.errors.append(exc)
                    return
            time.sleep(0.3)  # pacing: a steady write rate through the faults (not a wait)

    def start(self) -> None:
        self.running.set()
        self._thread.start()

    @contextmanager
    def paused(self) -> Iterator[None]:
        self.running.clear()
        with self._writing:  # a write in progress finishes; none starts after this
            pass
        try:
            yield
        finally:
            self.running.set()

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join(timeout=30)
        assert not self.errors, self.errors


class QueueDepth:
    """The largest number of ready tasks seen in the two queues, sampled every 0.25 s."""

    def __init__(self, settings: Settings) -> None:
        self.settings, self.peak = settings, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        client = redis.Redis.from_url(self.settings.redis_url, socket_connect_timeout=1)
        queues = (self.settings.fulltext_queue, self.settings.vectors_queue)
        while not self._stop.wait(0.25):
            try:
                self.peak = max(self.peak, sum(int(client.llen(q)) for q in queues))
            except redis.RedisError:
                continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _reader_position(settings: Settings, ddb: Any, reader: str) -> int:
    from indexer.adapters.aws.streams import latest_stream_arn
    from indexer.adapters.dynamodb.state import ShardCheckpointStore

    arn = latest_stream_arn(ddb, settings.table)
    saved = ShardCheckpointStore(ddb, settings.resolved_state_table, arn, reader).load()
    return max((int(c.sequence) for c in saved.values() if c.sequence), default=0)


def _recovered(settings: Settings, ddb: Any) -> bool:
    return _converged(settings, ddb) and _checkpointed_to_the_end(settings, ddb, EACH)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.stack
@pytest.mark.slow
def test_faults_under_write_load_end_with_zero_drift(settings: Settings, tmp_path: Path) -> None:

    (tmp_path / "redis").mkdir()
    (tmp_path / "os").mkdir()
    broker, node = PrivateRedis(tmp_path / "redis"), PrivateOpenSearch(tmp_path / "os")
    try:
        broker.start()
        node.start()
        _run_faults(settings.model_copy(update={
            "redis_url": broker.url, "opensearch_url": node.url, "retry_backoff_max_s": 5}),
            tmp_path, broker, node)
    finally:
        node.stop()
        broker.stop()


def _run_faults(
    settings: Settings, tmp_path: Path, broker: PrivateRedis, node: PrivateOpenSearch
) -> None:
    from indexer.adapters import factories
    from indexer.ops.reconcile import reconcile
    from indexer.pipeline.workers import spawn_workers, stop_workers, workers_of
    from tests.support.pipeline_helpers import prepare_tables, wait_until

    ddb = prepare_tables(settings)
    factories.fulltext_index(settings).ensure()
    log = tmp_path / "tail.log"
    started = spawn_workers(settings, ("fulltext", "vectors"), 1, "WARNING", own_session=True)
    workers = dict(zip(workers_of(("fulltext", "vectors")), started, strict=True))
    tail = _tail_process(settings, log, "--stage", "each")
    load = WriteLoad(ddb, settings.table)
    depth = QueueDepth(settings)
    timings: dict[str, float] = {}

    def recover(name: str, began: float) -> None:
        with load.paused():
            assert wait_until(lambda: _recovered(settings, ddb), timeout=300, interval=1.0), (
                name, log.read_text()[-3000:])
            timings[name] = time.monotonic() - began

    try:
        load.start()
        wait_for(lambda: load.done >= 10 or load.errors, timeout=120,
                 message=lambda: f"{load.done} warm-up writes, errors {load.errors}")
        recover("warm-up", time.monotonic())

        # 1. OpenSearch down: embedding goes on, queues stay bounded
        before = _reader_position(settings, ddb, "vectors")
        node.stop()
        began = time.monotonic()
        time.sleep(OUTAGE_S)  # the outage itself (not a wait): embedding must go on through it
        assert _reader_position(settings, ddb, "vectors") > before, "embedding stopped"
        node.start()
        recover("opensearch", began)

        # 2. the Qdrant store's owner frozen: full text goes on meanwhile
        os.killpg(workers["vectors"].pid, signal.SIGSTOP)
        began = time.monotonic()
        try:
            time.sleep(10)  # the freeze itself (not a wait): writes go on meanwhile
            with load.paused():
                assert wait_until(lambda: _converged(settings, ddb), timeout=120, interval=1.0)
            timings["fulltext while qdrant down"] = time.monotonic() - began
        finally:
            os.killpg(workers["vectors"].pid, signal.SIGCONT)
        recover("qdrant", began)

        # 3. Redis restarted
        broker.stop()
        began = time.monotonic()
        time.sleep(3)  # the outage itself: Redis stays down this long (not a wait)
        broker.start()
        recover("redis", began)

        # 4. a worker SIGKILLed, then started again
        _kill_group(workers["vectors"])
        began = time.monotonic()
        time.sleep(2)  # the outage itself: no vectors worker this long (not a wait)
        workers["vectors"] = spawn_workers(settings, ("vectors",), 1, "WARNING",
                                           own_session=True)[0]
        recover("worker", began)

        # 5. the tailer SIGKILLed, then started again
        _kill_group(tail)
        began = time.monotonic()
        time.sleep(2)  # the outage itself: no tailer this long (not a wait)
        tail = _tail_process(settings, log, "--stage", "each")
        recover("tailer", began)
        load.stop()
        assert wait_until(lambda: _recovered(settings, ddb), timeout=300, interval=1.0)
    finally:
        load.stopped.set()
        depth.close()
        if tail.poll() is None:
            tail.send_signal(signal.SIGTERM)
            try:
                tail.wait(timeout=60)
            except subprocess.TimeoutExpired:
                _kill_group(tail)
        stop_workers(list(workers.values()))
    print(f"\n{load.done} writes; recovery seconds {timings}; peak ready tasks {depth.peak}")
    assert load.done > 50
    # bounded: each reader has at most one page (<= 1000 records) of batches in flight
    assert depth.peak <= 2 * (1000 // settings.batch_messages + 1), depth.peak
    report = reconcile(settings)
    assert report.drifted == 0, report.to_json()
    assert sum(s.table_messages for s in report.mailboxes) > 0, report.to_json()
    assert factories.dead_letters(settings).list() == []
