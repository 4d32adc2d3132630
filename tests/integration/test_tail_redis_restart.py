"""``sidecar tail`` survives a Redis restart: the live-sources acceptance line.

"With a tailer running, writer operations on two mailboxes become visible in both indexes;
restarting Redis loses nothing and re-applies at most the un-checkpointed tail."

Everything runs as the real processes: a private AOF-backed ``redis-server`` this test owns
(so restarting it disturbs nobody), ``sidecar tail`` and the Celery workers as subprocesses
whose ``SIDECAR_REDIS_URL`` points at it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from indexer.settings import Settings, to_env
from tests.support.api_fixtures import free_port
from tests.support.waiting import wait_for

REDIS_SERVER = "/usr/bin/redis-server"
MAILBOXES = ["alpha", "beta"]


class PrivateRedis:
    """An AOF-backed (fsync always) redis-server on a fixed port and dir; restartable."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.dir = directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = directory / "redis.log"

    def start(self) -> None:
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.dir),
                "--save", "", "--logfile", str(self.log)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)

        def answers() -> bool:
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()
            try:
                return bool(client.ping())  # PING answers once the AOF is loaded
            except redis.RedisError:
                return False

        try:
            wait_for(answers, timeout=20, interval=0.05, message="private redis did not start")
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _tail_process(settings: Settings, log: Path, *options: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "indexer.cli.main", "tail", "--lease-s", "4", "--renew-s", "1",
            *options]
    with log.open("ab") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=out, start_new_session=True)


def _stopped_line(log: Path) -> dict[str, Any]:
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("{") and '"tail stopped"' in line:
            entry: dict[str, Any] = json.loads(line)
            return entry
    raise AssertionError("no 'tail stopped' line in the tailer's log:\n" + log.read_text())


def _snapshot(settings: Settings, ddb: Any, mailbox: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from tests.support.pipeline_helpers import opensearch_docs, table_messages

    want = {k: (m.get("subject"), m.get("spec_version"))
            for k, m in table_messages(ddb, settings.table, mailbox).items()}
    have = {k: (d.get("subject"), d.get("spec_version"))
            for k, d in opensearch_docs(settings, mailbox).items()}
    return want, have


def _converged(settings: Settings, ddb: Any) -> bool:
    try:
        return all(a == b for a, b in (_snapshot(settings, ddb, mb) for mb in MAILBOXES))
    except Exception:
        return False


def _checkpointed_to_the_end(
    settings: Settings, ddb: Any, readers: tuple[str, ...] = ("",)
) -> bool:
    """The readers' durable checkpoints stand at the stream's last record (the default
    `--stage all`: one reader, no checkpoint suffix)."""
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.aws.streams import iter_stream_records, latest_stream_arn
    from indexer.adapters.dynamodb.state import ShardCheckpointStore

    arn = latest_stream_arn(ddb, settings.table)
    streams = aws.client(settings, "dynamodbstreams")
    last = max((int(r["dynamodb"]["SequenceNumber"]) for r in iter_stream_records(streams, arn)),
               default=0)
    for reader in readers:
        saved = ShardCheckpointStore(ddb, settings.resolved_state_table, arn, reader).load()
        if max((int(c.sequence) for c in saved.values() if c.sequence), default=0) != last:
            return False
    return True


OPS = [("store", 4, "alpha", 0), ("rewrite", 2, "beta", 1), ("delete", 3, "alpha", 0),
       ("store", 5, "beta", 2), ("rewrite", 0, "alpha", 2), ("store", 1, "beta", 1),
       ("delete", 2, "alpha", 0), ("store", 6, "alpha", 1), ("rewrite", 4, "alpha", 1),
       ("store", 7, "beta", 0)]


@pytest.mark.stack
@pytest.mark.slow
def test_tail_survives_a_redis_restart(settings: Settings, tmp_path: Path) -> None:
    from indexer.adapters import factories
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.aws.streams import iter_stream_records, latest_stream_arn
    from indexer.settings import get_settings
    from tests.integration.test_tail import _write
    from tests.support.pipeline_helpers import (
        prepare_tables,
        qdrant_points,
        table_messages,
        wait_until,
    )
    from tests.support.pipeline_helpers import workers as run_workers

    server = PrivateRedis(tmp_path / "redis")
    server.dir.mkdir()
    server.start()
    settings = settings.model_copy(update={"redis_url": server.url})
    private = redis.Redis.from_url(server.url)
    ddb = prepare_tables(settings)
    log = tmp_path / "tail.log"
    tail: subprocess.Popen[bytes] | None = None
    try:
        with run_workers(settings):
            tail = _tail_process(settings, log)
            # 1. writes on two mailboxes become visible
            for i in range(4):
                for mb in MAILBOXES:
                    _write(ddb, settings.table, "store", i, mb)
            _write(ddb, settings.table, "rewrite", 0, "alpha", variant=1)
            _write(ddb, settings.table, "delete", 1, "beta")
            assert wait_until(lambda: _converged(settings, ddb), timeout=90), log.read_text()
            # the pipeline really runs on the private Redis, not on the shared one
            assert private.keys("celery-task-meta-*")
            shared = redis.Redis.from_url(get_settings().redis_url, socket_connect_timeout=2)
            try:
                assert not shared.exists(settings.fulltext_queue, settings.vectors_queue)
            finally:
                shared.close()

            # 2. Redis restarts while the writer goes on
            errors: list[BaseException] = []

            written = [0]

            def writer() -> None:
                try:
                    for op, i, mb, variant in OPS:
                        _write(ddb, settings.table, op, i, mb, variant=variant)
                        written[0] += 1
                        time.sleep(0.4)  # pacing: the writes span the restart (not a wait)
                except BaseException as exc:  # reported by the main thread
                    errors.append(exc)

            thread = threading.Thread(target=writer)
            thread.start()
            # a few writes in: their pages are in flight
            wait_for(lambda: written[0] >= 3 or errors, timeout=30,
                     message=lambda: f"{written[0]} writes, errors {errors}")
            server.stop()
            time.sleep(2.0)  # the outage itself: Redis stays down this long (not a wait)
            server.start()
            restarted = time.monotonic()
            thread.join(timeout=60)
            assert not thread.is_alive() and not errors, errors
            converged = wait_until(lambda: _converged(settings, ddb), timeout=120)
            took = time.monotonic() - restarted
            assert converged, f"not converged {took:.0f}s after the Redis restart: " + repr(
                [_snapshot(settings, ddb, mb) for mb in MAILBOXES])
            print(f"converged {took:.1f}s after the Redis restart")
            assert wait_until(lambda: _checkpointed_to_the_end(settings, ddb), timeout=120)
            assert tail.poll() is None, "the tailer died:\n" + log.read_text()
            tail.send_signal(signal.SIGTERM)
            assert tail.wait(timeout=120) == 0, log.read_text()
    finally:
        if tail is not None and tail.poll() is None:
            os.killpg(tail.pid, signal.SIGKILL)
            tail.wait(timeout=10)
        private.close()

    try:
        # the tailer never died, so nothing was re-read: its one reader (the default) applied
        # every stream record once
        arn = latest_stream_arn(ddb, settings.table)
        total = len(list(iter_stream_records(aws.client(settings, "dynamodbstreams"), arn)))
        stopped = _stopped_line(log)
        assert stopped["applied"] == {"all": total}, (stopped, total)
        assert stopped["gaps"] == 0
        # both indexes: the vector index holds exactly the messages with text for AI
        points = qdrant_points(settings)
        want = {(mb, k) for mb in MAILBOXES
                for k, m in table_messages(ddb, settings.table, mb).items()
                if (m.get("forai") or "").strip()}
        assert set(points) == want
        assert factories.dead_letters(settings).list() == []
    finally:
        server.stop()
