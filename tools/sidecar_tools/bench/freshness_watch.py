"""Freshness, the watching side: the real ``sidecar tail`` and workers started as processes
under the probe, and the engines polled for each written message until it is searchable
(:mod:`sidecar_tools.bench.freshness` drives a run)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from indexer.settings import Settings, to_env
from sidecar_tools.bench.freshness_probe import ABLATE_ENV
from sidecar_tools.bench.freshness_probe import ENV as PROBE_ENV
from sidecar_tools.bench.freshness_report import (
    Ref,
)

# -- the processes ----------------------------------------------------------------------------

def probe_argv(argv: list[str]) -> list[str]:
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


def start_processes(settings: Settings, stage: str, events: Path, log: Path, *,
                    fulltext_concurrency: int | None = None, ablate: str = "",
                    roles: tuple[str, ...] | None = None) -> Processes:
    """One worker per queue of ``roles`` (None: every role; the full-text one with
    ``fulltext_concurrency`` processes, as ``sidecar worker --concurrency``; None: its
    default), then ``sidecar tail``, each under the probe; ``ablate="contacts"``: the
    full-text task keeps no contact summary (a measurement's ablation,
    :mod:`sidecar_tools.bench.freshness_phases`). ``roles=("fulltext",)``: the Edge layout,
    where ``sidecar serve`` owns the embedded store and consumes the vectors queue itself."""
    from indexer.pipeline.workers import ROLES, worker_argv, workers_of

    env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1", PROBE_ENV: str(events),
           ABLATE_ENV: ablate}
    procs = Processes()
    for worker in workers_of(ROLES if roles is None else roles):
        concurrency = fulltext_concurrency if worker == "fulltext" else None
        procs.start(probe_argv(worker_argv(settings, worker, concurrency, "WARNING")), env, log)
    procs.start(probe_argv(["tail", "--stage", stage, "--metrics-port", "0"]), env, log)
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
    from indexer.adapters.opensearch.index import build_client

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
    from indexer.adapters.embedding.embedder import DIMENSION, MODEL_SLUG
    from indexer.adapters.qdrant.index import VectorIndex, build_store
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
