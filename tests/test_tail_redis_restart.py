"""``sidecar tail`` survives a Redis restart: the live-sources acceptance line.

"With a tailer running, writer operations on two mailboxes become visible in both indexes;
restarting Redis loses nothing and re-applies at most the un-checkpointed tail."

Redis (broker, result backend, dead letters) is a private ``redis-server`` this test owns, so
restarting it disturbs nobody; the Celery app of this process is pointed at it for the test.
"""

from __future__ import annotations

import signal
import socket
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

REDIS_SERVER = "/usr/bin/redis-server"
MAILBOXES = ["alpha", "beta"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """An AOF-backed (fsync always) redis-server on a fixed port and dir; restartable."""

    def __init__(self, directory: Path) -> None:
        self.port = _free_port()
        self.dir = directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "redis.log"

    def start(self) -> None:
        argv = [
            REDIS_SERVER,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--logfile",
            str(self.log),
        ]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                if client.ping():
                    # the AOF is loaded once PING answers (LOADING errors before that)
                    client.close()
                    return
            except redis.RedisError:
                pass
            assert self.proc.poll() is None, self.log.read_text()
            assert time.monotonic() < deadline, "private redis did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _reset_celery_clients(app: Any) -> None:
    """Drop the app's cached broker pools and result backends so new ones use ``app.conf``."""
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    amqp = app.__dict__.get("amqp")
    if amqp is not None and amqp._producer_pool is not None:
        amqp._producer_pool.force_close_all()
        amqp._producer_pool = None
    app._backend_cache = None
    app._local = threading.local()  # per-thread backends (the redis backend is not thread-safe)


@contextmanager
def celery_on(settings: Settings) -> Iterator[Any]:
    """Point this process's Celery app (producer side: the tailer's Ingestor) at ``settings``."""
    from indexer.pipeline.celery_app import app, configure
    from indexer.settings import get_settings

    configure(app, settings)
    _reset_celery_clients(app)
    try:
        assert app.conf.broker_url == settings.redis_url
        assert app.conf.result_backend == settings.redis_url
        yield app
    finally:
        configure(app, get_settings())
        _reset_celery_clients(app)


def _snapshot(settings: Settings, ddb: Any, mailbox: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from tests.pipeline_helpers import opensearch_docs, table_messages

    want = {
        k: (m.get("subject"), m.get("spec_version"))
        for k, m in table_messages(ddb, settings.table, mailbox).items()
    }
    have = {
        k: (d.get("subject"), d.get("spec_version"))
        for k, d in opensearch_docs(settings, mailbox).items()
    }
    return want, have


def _converged(settings: Settings, ddb: Any) -> bool:
    try:
        return all(a == b for a, b in (_snapshot(settings, ddb, mb) for mb in MAILBOXES))
    except Exception:
        return False


def _signal_sends(running: Any) -> threading.Event:
    """An event set whenever the tailer has just sent a page's tasks (before waiting on them)."""
    sent = threading.Event()
    factory = running.tailer._sink_factory

    def sink() -> Any:
        inner = factory()
        flush = inner.flush

        def flushed() -> None:
            flush()
            sent.set()

        inner.flush = flushed
        return inner

    running.tailer._sink_factory = sink
    return sent


@pytest.mark.stack
@pytest.mark.slow
def test_tail_survives_a_redis_restart(settings: Settings, tmp_path: Path) -> None:
    from indexer.adapters import aws
    from indexer.adapters.streams import iter_stream_records, latest_stream_arn
    from indexer.pipeline import deps
    from indexer.settings import get_settings
    from tests.pipeline_helpers import prepare_tables, qdrant_points, table_messages, wait_until
    from tests.pipeline_helpers import workers as run_workers
    from tests.test_tail import Running, _write

    server = PrivateRedis(tmp_path / "redis")
    server.dir.mkdir()
    server.start()
    settings = settings.model_copy(update={"redis_url": server.url})
    private = redis.Redis.from_url(server.url)
    ddb = prepare_tables(settings)
    tailer: Running | None = None
    try:
        with celery_on(settings), run_workers(settings):
            tailer = Running(settings)
            sent = _signal_sends(tailer)
            # 1. writes on two mailboxes become visible
            for i in range(4):
                for mb in MAILBOXES:
                    _write(ddb, settings.table, "store", i, mb)
            _write(ddb, settings.table, "rewrite", 0, "alpha", variant=1)
            _write(ddb, settings.table, "delete", 1, "beta")
            assert wait_until(lambda: _converged(settings, ddb), timeout=60)
            # the producer really talks to the private Redis, and not to the shared one
            assert private.keys("celery-task-meta-*")
            shared = redis.Redis.from_url(get_settings().redis_url, socket_connect_timeout=2)
            try:
                assert not shared.exists(settings.fulltext_queue, settings.vectors_queue)
            finally:
                shared.close()

            # 2. Redis restarts while the writer goes on
            ops = [
                ("store", 4, "alpha", 0),
                ("rewrite", 2, "beta", 1),
                ("delete", 3, "alpha", 0),
                ("store", 5, "beta", 2),
                ("rewrite", 0, "alpha", 2),
                ("store", 1, "beta", 1),
                ("delete", 2, "alpha", 0),
                ("store", 6, "alpha", 1),
                ("rewrite", 4, "alpha", 1),
                ("store", 7, "beta", 0),
            ]
            errors: list[BaseException] = []

            def writer() -> None:
                try:
                    for op, i, mb, variant in ops:
                        _write(ddb, settings.table, op, i, mb, variant=variant)
                        time.sleep(0.4)
                except BaseException as exc:  # reported by the main thread
                    errors.append(exc)

            thread = threading.Thread(target=writer)
            sent.clear()
            thread.start()
            # Redis goes away right after the tailer sent a page's tasks: their results are
            # pending (the tailer waits on them) and later pages are not checkpointed yet
            assert sent.wait(timeout=30)
            server.stop()
            time.sleep(2.0)
            server.start()
            restarted = time.monotonic()
            thread.join(timeout=60)
            assert not thread.is_alive() and not errors, errors
            converged = wait_until(lambda: _converged(settings, ddb), timeout=120)
            took = time.monotonic() - restarted
            assert converged, f"not converged {took:.0f}s after the Redis restart: " + repr(
                [_snapshot(settings, ddb, mb) for mb in MAILBOXES]
            )
            print(f"converged {took:.1f}s after the Redis restart")
            tailer.stop()
            tailer_done = tailer
            tailer = None
    finally:
        if tailer is not None:
            tailer.event.set()
            tailer.thread.join(timeout=5)
        private.close()
        server.stop()

    server.start()  # for the dead-letter check below (its AOF holds everything)
    try:
        # the tailer read every stream record exactly once: nothing skipped, nothing re-read
        arn = latest_stream_arn(ddb, settings.table)
        total = len(list(iter_stream_records(aws.client(settings, "dynamodbstreams"), arn)))
        assert tailer_done.tailer.applied == total
        assert not tailer_done.tailer.gaps
        # both indexes: the vector index holds exactly the messages with text for AI
        points = qdrant_points(settings)
        want = {
            (mb, k)
            for mb in MAILBOXES
            for k, m in table_messages(ddb, settings.table, mb).items()
            if (m.get("forai") or "").strip()
        }
        assert set(points) == want
        assert deps.dead_letters(settings).list() == []
    finally:
        server.stop()
