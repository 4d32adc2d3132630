"""Wire the ingest core to Celery and the dead-letter store, and run worker processes.

Worker layout (2 cores): one worker process per queue. The full-text worker never loads the
model; the vectors worker owns the embedder and — in embedded mode — the Qdrant store, which
admits one process only, so that worker runs with concurrency 1. With ``SIDECAR_QDRANT_URL``
both roles scale out to any number of processes and hosts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from typing import IO, Any

from indexer.adapters import factories
from indexer.adapters.broker import lost_task_check
from indexer.core.dead_letters import trigger_of
from indexer.core.records import RawRecord
from indexer.pipeline.deployment import stamped
from indexer.pipeline.ingest import DeadLetter, Ingestor, Pending, Send
from indexer.settings import Settings, to_env

ROLES = ("fulltext", "vectors")


def celery_send(settings: Settings) -> Send:
    from indexer.pipeline import tasks

    def send(stage: str, payload: dict[str, Any]) -> Pending:
        task = tasks.fulltext if stage == "fulltext" else tasks.vectors
        queue = settings.fulltext_queue if stage == "fulltext" else settings.vectors_queue
        # Every task names the deployment it was planned for (see ``deployment``).
        result: Pending = task.apply_async(args=[stamped(settings, payload)], queue=queue)
        return result

    return send


class _Skipped:
    """The result of a stage another reader applies: nothing to wait for."""

    def get(self, timeout: float | None = None, propagate: bool = True) -> Any:
        return {}


def only_stage(send: Send, stage: str) -> Send:
    """A ``send`` that enqueues only ``stage``'s tasks (a per-stage stream reader)."""

    def filtered(task_stage: str, payload: dict[str, Any]) -> Pending:
        return send(task_stage, payload) if task_stage == stage else _Skipped()

    return filtered


def decode_dead_letter(settings: Settings) -> DeadLetter:
    store = factories.dead_letters(settings)

    def write(item: RawRecord, reason: str) -> None:
        # Only the trigger: keys, event name, sequence number — never images or addresses.
        store.add(stage="decode", reason=reason, payload=trigger_of(item.raw), source=item.source)

    return write


def ingestor(settings: Settings) -> Ingestor:
    """The Celery ingestor of the deployment; it sends again a task the broker lost."""
    return Ingestor(celery_send(settings), decode_dead_letter(settings),
                    settings.batch_messages, lost=lost_task_check(settings))


def worker_argv(settings: Settings, role: str, concurrency: int, loglevel: str) -> list[str]:
    queue = settings.fulltext_queue if role == "fulltext" else settings.vectors_queue
    if role == "vectors" and settings.qdrant_embedded:
        concurrency = 1  # the embedded store admits a single owner process
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "indexer.pipeline.celery_app",
        "worker",
        "-Q",
        queue,
        "-c",
        str(concurrency),
        "-P",
        "prefork",
        "-l",
        loglevel,
        "-n",
        f"{role}-{uuid.uuid4().hex[:6]}@%h",
        "--without-gossip",
        "--without-mingle",
        "-O",
        "fair",
    ]


def spawn_workers(
    settings: Settings,
    roles: tuple[str, ...],
    concurrency: int,
    loglevel: str = "INFO",
    *,
    own_session: bool = False,
    log: IO[bytes] | None = None,
) -> list[subprocess.Popen[bytes]]:
    """One Celery worker process per role; ``own_session`` puts each in its own process group,
    ``log`` receives their output (default: inherited)."""
    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"}
    return [
        subprocess.Popen(
            worker_argv(settings, role, concurrency, loglevel),
            env=env,
            start_new_session=own_session,
            stdout=log,
            stderr=log,
        )
        for role in roles
    ]


def supervise(procs: list[subprocess.Popen[bytes]]) -> int:
    """Run until a signal or until one worker exits; then stop the others (warm shutdown).

    Exit 0 only after a requested stop; a worker that died on its own is an error.
    """
    signalled = False

    def terminate() -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal signalled
        signalled = True
        terminate()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while all(p.poll() is None for p in procs):
        time.sleep(0.5)
    terminate()
    codes = [p.wait() for p in procs]
    return 0 if signalled else max(1, *codes)


def stop_workers(procs: list[subprocess.Popen[bytes]], timeout_s: float = 60.0) -> None:
    """Warm shutdown (SIGTERM: finish the current task), then SIGKILL stragglers."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
