"""Run the Celery worker processes: one per queue, supervised until a signal.

Worker layout (2 cores): one worker per queue. The full-text worker never loads the model and
runs two processes by default: its tasks mostly wait on the table and the engines, and its
queue also carries each batch's contact recount (``sidecar.contacts``); with one process the
next batch waits behind both. While the batch itself still waited for the refresh before
recounting, one process let the queue grow without bound at 5 messages/s
(docs/results/runs/2026-12-05-freshness-contacts.md); since the recount is deferred, two
processes against one measured queue p99 0.23 against 1.37 s
(docs/results/runs/2026-12-05-freshness-deferred-contacts.md). The vectors worker owns the
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


def worker_argv(
    settings: Settings, role: str, concurrency: int | None, loglevel: str
) -> list[str]:
    """``concurrency`` None: the role's :data:`DEFAULT_CONCURRENCY`."""
    queue = settings.fulltext_queue if role == "fulltext" else settings.vectors_queue
    if concurrency is None:
        concurrency = DEFAULT_CONCURRENCY[role]
    if role == "vectors" and settings.qdrant_embedded:
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
    concurrency: int | None,
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
