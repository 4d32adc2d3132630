"""The write side of ``sidecar bench-cluster``: bulk document and point writes into one stack,
and indexing throughput through real Celery workers with 1, 2, 4 processes per role.

Both stacks get the same writes from the same source (the documents and points the pipeline
wrote into the single-node stack), in the same chunks as ``bench-scale`` (500 documents per
``_bulk``, 512 points per upsert, each upsert waited for), so the two rates differ only by
the stack that takes them: one node, or three nodes that also write every replica.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opensearchpy import helpers

from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.tables import init_tables
from indexer.adapters.embedding.embedder import DIMENSION
from indexer.adapters.factories import vector_slug
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.task_payload import TaskPayload
from indexer.core.vectors import PointWrite
from indexer.pipeline.dispatch import celery_send
from indexer.pipeline.workers import spawn_workers, stop_workers
from indexer.settings import Settings
from sidecar_tools.bench import pipeline
from sidecar_tools.bench.dataset import Dataset
from sidecar_tools.bench.timing import rate

DOC_CHUNK = 500
POINT_BATCH = 512
ROLES = ("fulltext", "vectors")


@dataclass(frozen=True)
class Written:
    """Items written in ``seconds`` (the writes alone: no read of the source, no refresh)."""

    items: int
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {"items": self.items, "seconds": round(self.seconds, 3),
                "per_s": rate(self.items, self.seconds)}


def copy_box(mailbox: str, n: int) -> str:
    """Copy ``n``'s mailbox id; copy 0 is the original (its own mailbox, ids and routing)."""
    return mailbox if n == 0 else f"copy-{n}-{mailbox}"


def read_documents(source: Settings) -> list[dict[str, Any]]:
    """Every document of ``source``'s alias, as scanned (``_id``, ``_source``)."""
    client = build_opensearch(source)
    client.indices.refresh(index=source.opensearch_index)
    return list(helpers.scan(client, index=source.opensearch_index,
                             query={"query": {"match_all": {}}}, size=1000))


def write_documents(docs: Sequence[dict[str, Any]], target: Settings,
                    copies: Sequence[int]) -> Written:
    """``docs`` once per copy number into ``target``'s alias (created from the template with
    its shards and replicas), with ``streaming_bulk`` retrying 429s like ``bench-scale``."""
    client = build_opensearch(target)
    alias = target.opensearch_index
    OpenSearchIndex(client, alias).ensure()

    def actions() -> Iterator[dict[str, Any]]:
        for n in copies:
            for doc in docs:
                box = copy_box(str(doc["_source"]["mailbox_id"]), n)
                yield {"_index": alias, "_id": doc["_id"] if n == 0 else f"{n}-{doc['_id']}",
                       "_routing": box, "_source": {**doc["_source"], "mailbox_id": box}}

    written, started = 0, time.perf_counter()
    for ok, _ in helpers.streaming_bulk(client, actions(), chunk_size=DOC_CHUNK,
                                        raise_on_error=True, max_retries=8, initial_backoff=2,
                                        max_backoff=30):
        written += int(ok)
    seconds = time.perf_counter() - started
    client.indices.refresh(index=alias)
    return Written(written, seconds)


def read_points(source: Settings) -> list[PointWrite]:
    """Every point of ``source``'s collection, with its vector."""
    store = build_store(source)
    try:
        index = VectorIndex(store, source.qdrant_collection, vector_slug(source), DIMENSION)
        return [PointWrite(p.id, p.vector or [], p.payload)
                for page in store.scroll(index.alias, None, None, with_vector=True)
                for p in page]
    finally:
        store.close()


def write_points(points: Sequence[PointWrite], target: Settings,
                 copies: Sequence[int]) -> Written:
    """``points`` once per copy number into ``target``'s collection (created with its shard
    number and replication factor), in upserts of ``POINT_BATCH`` each waited for."""
    store = build_store(target)
    try:
        index = VectorIndex(store, target.qdrant_collection, vector_slug(target), DIMENSION)
        index.ensure()
        written, started = 0, time.perf_counter()
        for n in copies:
            batch = [PointWrite(p.id if n == 0 else str(uuid.uuid5(uuid.NAMESPACE_URL,
                                                                   f"copy-{n}-{p.id}")),
                                p.vector,
                                {**p.payload,
                                 "mailbox_id": copy_box(str(p.payload["mailbox_id"]), n)})
                     for p in points]
            for at in range(0, len(batch), POINT_BATCH):
                store.upsert(index.alias, batch[at : at + POINT_BATCH])
            store.flush()
            written += len(batch)
        return Written(written, time.perf_counter() - started)
    finally:
        store.close()


def _warm_all(settings: Settings, processes: int) -> float:
    """Two empty batches per process and role, sent at once: with ``-O fair`` each idle
    process takes one, so every process has imported, connected and built its encoder before
    the clock starts (a process loads its model at its first vectors task)."""
    started = time.perf_counter()
    send = celery_send(settings)
    pending = [send(role, TaskPayload.of([]).to_json())
               for role in ROLES for _ in range(2 * processes)]
    for result in pending:
        result.get(timeout=600)
    return time.perf_counter() - started


def indexing_run(settings: Settings, data: Dataset, processes: int, log: Path) -> dict[str, Any]:
    """``data``'s stream end to end (``ingest --wait``: both indexes) with ``processes`` worker
    processes per role (one Celery worker per role, prefork concurrency ``processes``);
    messages/s from the first record fed to the last batch applied, warm-up apart."""
    init_tables(aws.client(settings, "dynamodb"), settings)
    with log.open("ab") as sink:
        procs = spawn_workers(settings, ROLES, processes, loglevel="WARNING", own_session=True,
                              log=sink)
    try:
        warm_s = _warm_all(settings, processes)
        run = pipeline.ingest(settings, data.stream, len(data.messages), fulltext_only=False)
    finally:
        stop_workers(procs)
    return {"processes": processes, "warm_s": round(warm_s, 3), **run.as_json()}
