"""The pipeline end to end: exported stream records → ``ingest --wait`` → both indexes.

Each run gets a namespace of its own (index alias, Qdrant store, queues, sidecar state table)
over the shared benchmark table, so runs never see each other's documents or cached vectors.
Workers are warmed with an empty batch before the clock starts: a model load is paid once per
process, not per message, and is reported apart.
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.tables import init_tables
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.core.task_payload import TaskPayload
from indexer.pipeline.dispatch import celery_send, decode_dead_letter, only_stage
from indexer.pipeline.ingest import Ingestor, IngestSummary, Send
from indexer.pipeline.workers import spawn_workers, stop_workers, workers_of
from indexer.settings import Settings
from indexer.sources.files import read_sources
from sidecar_tools.bench.timing import peak_rss_mib, rate


@dataclass
class IngestRun:
    """One ingest of the stream: rates are per stored message (not per record)."""

    messages: int
    seconds: float
    summary: IngestSummary
    searchable_s: float | None = None  # until the last message was full-text searchable

    @property
    def per_s(self) -> float:
        return rate(self.messages, self.seconds)

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "seconds": round(self.seconds, 3),
            "messages_per_s": self.per_s,
            "searchable_s": self.searchable_s,
            "records": self.summary.read,
            "applied": self.summary.applied,
            "dead_lettered": self.summary.dead_lettered,
            "embedded": self.summary.embedded,
            # Worker-timed busy seconds per stage; the vectors stage's own time (table reads,
            # cache lookups, store writes and flushes) is its time less the embedder's.
            "stage_s": {k: round(v, 3) for k, v in self.summary.stage_s.items()},
            "embed_s": round(self.summary.embed_s, 3),
            "vectors_own_s": round(self.summary.stage_s.get("vectors", 0.0)
                                   - self.summary.embed_s, 3),
        }


def namespace(base: Settings, table: str, run_id: str, tag: str, workdir: Path) -> Settings:
    """Settings of one benchmark run over ``table``: everything else is its own."""
    name = f"bench-{run_id}-{tag}"
    return base.model_copy(
        update={
            "table": table,
            "state_table": f"{name}-state",
            "opensearch_index": name,
            "qdrant_collection": name,
            "qdrant_path": workdir / tag / "qdrant",
            "queue_prefix": name,
        }
    )


def _sender(settings: Settings, fulltext_only: bool) -> Send:
    """The pipeline's send; full-text only: vectors tasks are not enqueued nor waited for."""
    send = celery_send(settings)
    return only_stage(send, "fulltext") if fulltext_only else send


def _searchable_after(settings: Settings, expected: int, started: float, out: list[float]) -> None:
    """Poll the alias's count until ``expected`` documents are searchable (a refresh made them
    visible); records the elapsed time."""
    client = build_opensearch(settings)
    deadline = started + 3600
    while time.perf_counter() < deadline:
        try:
            found = int(client.count(index=settings.opensearch_index)["count"])
        except Exception:
            found = 0
        if found >= expected:
            out.append(time.perf_counter() - started)
            return
        time.sleep(0.1)


def ingest(settings: Settings, stream: Path, messages: int, *, fulltext_only: bool) -> IngestRun:
    """Feed the stream file and wait until every batch is applied (by the sinks waited for)."""
    run = Ingestor(
        _sender(settings, fulltext_only), decode_dead_letter(settings), settings.batch_messages
    )
    seen: list[float] = []
    started = time.perf_counter()
    poller = threading.Thread(
        target=_searchable_after, args=(settings, messages, started, seen), daemon=True
    )
    poller.start()
    run.feed_all(read_sources([str(stream)], aws.client(settings, "s3")))
    summary = run.wait(3600)
    elapsed = time.perf_counter() - started
    poller.join(timeout=120)
    return IngestRun(messages, elapsed, summary, seen[0] if seen else None)


def warm(settings: Settings, roles: tuple[str, ...]) -> float:
    """An empty batch per role: the workers import, connect and load the model now."""
    started = time.perf_counter()
    send = celery_send(settings)
    for role in roles:
        send(role, TaskPayload.of([]).to_json()).get(timeout=600)
    return time.perf_counter() - started


@dataclass
class Workers:
    settings: Settings
    roles: tuple[str, ...]
    procs: list[subprocess.Popen[bytes]]
    warm_s: float

    def peak_rss_mib(self) -> dict[str, float]:
        """Each Celery worker's peak RSS (the full-text role runs two: ``fulltext`` and its
        recounts' ``contacts``)."""
        return {w: peak_rss_mib(p.pid)
                for w, p in zip(workers_of(self.roles), self.procs, strict=True)}


def start_workers(settings: Settings, roles: tuple[str, ...], log: Path) -> Workers:
    init_tables(aws.client(settings, "dynamodb"), settings)
    with log.open("ab") as sink:
        procs = spawn_workers(settings, roles, 1, loglevel="WARNING", own_session=True, log=sink)
    try:
        return Workers(settings, roles, procs, warm(settings, roles))
    except BaseException:
        stop_workers(procs)
        raise


def stop(workers: Workers) -> None:
    stop_workers(workers.procs)
