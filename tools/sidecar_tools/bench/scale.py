"""Search latency with many indexed messages, without loading them all through moto.

The issue's target is API p99 at 100,000 indexed messages. Loading 100,000 messages into moto
and running them through the pipeline would take about two hours here (157 s per 5,000 to load,
~27 msgs/s to index), so this measures the part that depends on the index size: N messages go
through the real pipeline into one mailbox (the one searched, its rows in the table, so the
API's join to DynamoDB is real), then their OpenSearch documents and Qdrant points are copied
into ``copies`` other mailboxes — same texts and vectors, other mailbox ids and keys — so the
engines hold ``N * (copies + 1)`` messages when the API is measured exactly as ``sidecar bench``
measures it. Copies are never searched (other mailboxes), but every search filters them out,
which is the cost that grows.
"""

from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opensearchpy import helpers

from indexer.adapters.opensearch import build_client as build_opensearch
from indexer.core.vectors import PointWrite
from indexer.pipeline import deps
from indexer.settings import Settings
from sidecar_tools.bench import corpus as corpus_mod
from sidecar_tools.bench import dataset, limits, pipeline, queries, search

COPY_BATCH = 512
Log = Any


@dataclass(frozen=True)
class ScaleOptions:
    corpus: Path | None
    messages: int
    copies: int
    search_seconds: float = 20.0
    clients: int = 8
    workdir: Path = Path(".sidecar/bench")


def _copy_box(mailbox: str, n: int) -> str:
    return f"copy-{n}-{mailbox}"


def copy_documents(settings: Settings, mailbox: str, copies: int) -> int:
    """Every document of ``mailbox``, ``copies`` times into other mailboxes (own routing)."""
    client = build_opensearch(settings)
    alias = settings.opensearch_index
    docs = list(helpers.scan(client, index=alias, query={"query": {"match_all": {}}}))

    def actions() -> Any:
        for n in range(1, copies + 1):
            box = _copy_box(mailbox, n)
            for doc in docs:
                source = {**doc["_source"], "mailbox_id": box}
                yield {"_index": alias, "_id": f"{n}-{doc['_id']}", "_routing": box,
                       "_source": source}

    written = 0
    for ok, _ in helpers.streaming_bulk(client, actions(), chunk_size=500, raise_on_error=True):
        written += int(ok)
    client.indices.refresh(index=alias)
    return written


def copy_points(settings: Settings, copies: int) -> tuple[int, int]:
    """Every point of the collection, ``copies`` times with other mailbox ids and point ids;
    returns (points before, points written)."""
    index = deps.vector_index(settings)
    try:
        store = index.store
        originals = [
            p for page in store.scroll(index.alias, None, None, with_vector=True) for p in page
        ]
        written = 0
        for n in range(1, copies + 1):
            structs = [
                PointWrite(
                    str(uuid.uuid5(uuid.NAMESPACE_URL, f"copy-{n}-{p.id}")),
                    p.vector or [],
                    {**p.payload, "mailbox_id": _copy_box(str(p.payload["mailbox_id"]), n)},
                )
                for p in originals
            ]
            for start in range(0, len(structs), COPY_BATCH):
                store.upsert(index.alias, structs[start : start + COPY_BATCH])
                store.flush()
            written += len(structs)
        return len(originals), written
    finally:
        index.close()
        deps.vector_index.cache_clear()


def run(opts: ScaleOptions, base: Settings, log: Log) -> dict[str, Any]:
    """Index N messages, copy them ``copies`` times, measure the API's four modes."""
    path = opts.corpus if opts.corpus is not None else corpus_mod.default_corpus()
    chosen = corpus_mod.select(path, opts.messages, opts.workdir / "corpus")
    data = dataset.prepare(base, chosen, opts.workdir / "corpus" / chosen.key)
    run_id = uuid.uuid4().hex[:8]
    run_dir = opts.workdir / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    settings = pipeline.namespace(base, data.table, run_id, "scale", run_dir)
    mailbox = data.messages[0].ref.mailbox_id
    out: dict[str, Any] = {"messages": len(data.messages), "copies": opts.copies}
    try:
        workers = pipeline.start_workers(settings, ("fulltext", "vectors"), run_dir / "w.log")
        try:
            log(f"scale: indexing {len(data.messages)} messages through the pipeline")
            out["pipeline"] = pipeline.ingest(settings, data.stream, len(data.messages),
                                              fulltext_only=False)
        finally:
            pipeline.stop(workers)
        started = time.perf_counter()
        log(f"scale: copying documents and points into {opts.copies} other mailboxes")
        out["documents_copied"] = copy_documents(settings, mailbox, opts.copies)
        out["points_original"], out["points_copied"] = copy_points(settings, opts.copies)
        out["copy_s"] = time.perf_counter() - started
        client = build_opensearch(settings)
        out["indexed_documents"] = int(client.count(index=settings.opensearch_index)["count"])
        work = search.Workload(
            mailbox,
            queries.fulltext_queries(data.messages, mailbox),
            queries.free_text_queries(data.messages, mailbox),
            queries.similar_keys(data.messages, mailbox),
        )
        api = search.start_api(settings, mailbox, 0, run_dir / "api.log")
        try:
            log(f"scale: API, {opts.clients} clients x {opts.search_seconds:.0f}s per mode")
            out["api"] = search.measure_api(api, work, clients=opts.clients,
                                            seconds=opts.search_seconds)
        finally:
            out["api_rss_mib"] = search.stop_api(api)
    finally:
        limits.drop_index(build_opensearch(base), settings.opensearch_index)
        shutil.rmtree(run_dir, ignore_errors=True)
    return out
