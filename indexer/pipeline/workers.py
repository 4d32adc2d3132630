"""Run the Celery worker processes: one per queue, supervised until a signal.

Worker layout (2 cores): one worker per queue. The full-text worker never loads the model and
runs two processes by default: its tasks mostly wait on the table and the engines. Beside it
the full-text role runs a second, small worker on the contacts queue (``<prefix>.contacts``):
each batch's contact recount (``sidecar.contacts``) waits ~0.3 s for the index's refresh and
then works for milliseconds, so it runs on a pool of :data:`CONTACTS_THREADS` threads in one
process. On the full-text queue, recounts held one of the two processes through that wait
for each batch (~1.1 process-seconds per second at 5 messages/s) and the next batches queued
behind them: the queue's p99 was 0.35-0.61 s of a 1.3-1.6 s freshness p99
(docs/results/runs/2026-12-05-freshness-fresh-three.md); on their own, 10-18 ms
(docs/results/runs/2026-12-05-freshness-contacts-queue.md). The vectors worker owns the
embedder and — in embedded mode — the Qdrant store, which admits one process only, so that
worker runs with concurrency 1. With ``SIDECAR_QDRANT_URL`` both roles scale out to any
number of processes and hosts. Sending them tasks is :mod:`indexer.pipeline.dispatch`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from typing import IO

from indexer.settings import Settings, to_env

ROLES = ("fulltext", "vectors")
DEFAULT_CONCURRENCY = {"fulltext": 2, "vectors": 1}
"""Processes per role when none is given: I/O-bound full text 2, CPU-bound vectors 1."""
CONTACTS_THREADS = 8
"""Threads of the full-text role's contacts worker: recounts waiting for a refresh at once
(each needs one for ~0.3 s; eight cover ~25 batches a second)."""
WORKERS = {"fulltext": ("fulltext", "contacts"), "vectors": ("vectors",)}
"""The Celery workers each role runs (``contacts``: the full-text role's recounts)."""


def workers_of(roles: tuple[str, ...]) -> list[str]:
    """The Celery workers these roles run, in the order :func:`spawn_workers` starts them."""
    return [worker for role in roles for worker in WORKERS[role]]


def worker_argv(
    settings: Settings, worker: str, concurrency: int | None, loglevel: str
) -> list[str]:
    """One Celery worker's command line; ``worker`` is a role or ``contacts``.
    ``concurrency`` None: the role's :data:`DEFAULT_CONCURRENCY` (the contacts worker always
    runs :data:`CONTACTS_THREADS` threads)."""
    pool = "prefork"
    if worker == "contacts":
        queue, pool, concurrency = settings.contacts_queue, "threads", CONTACTS_THREADS
    elif worker == "fulltext":
        queue = settings.fulltext_queue
    else:
        queue = settings.vectors_queue
    if concurrency is None:
        concurrency = DEFAULT_CONCURRENCY[worker]
    if worker == "vectors" and settings.qdrant_embedded:
        concurrency = 1  # the embedded store admits a single owner process
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "indexer.pipeline.celery_app",
        "-q",  # no banner: a worker's stdout and stderr are JSON lines only (issue 40)
        "worker",
        "-Q",
        queue,
        "-c",
        str(concurrency),
        "-P",
        pool,
        "-l",
        loglevel,
        "-n",
        f"{worker}-{uuid.uuid4().hex[:6]}@%h",
        "--without-gossip",
        "--without-mingle",
        "-O",
        "fair",
    ]


def spawn_workers(
    settings: Settings,
    roles: tuple[str, ...],
    concurrency: int | None,
    loglevel: str = "INFO",
    *,
    own_session: bool = False,
    log: IO[bytes] | None = None,
) -> list[subprocess.Popen[bytes]]:
    """The Celery worker processes of each role (:data:`WORKERS`: full text two, vectors
    one), in that order; ``own_session`` puts each in its own process group, ``log`` receives
    their output (default: inherited)."""
    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"}
    return [
        subprocess.Popen(
            worker_argv(settings, worker, concurrency, loglevel),
            env=env,
            start_new_session=own_session,
            stdout=log,
            stderr=log,
        )
        for worker in workers_of(roles)
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
