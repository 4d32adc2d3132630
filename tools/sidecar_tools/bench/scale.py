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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opensearchpy import helpers

from indexer.adapters import factories
from indexer.adapters.embedding.embedder import Embedder, build_embedder
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.core.vectors import PointWrite
from indexer.settings import Settings
from sidecar_tools.bench import corpus as corpus_mod
from sidecar_tools.bench import dataset, limits, pipeline, queries, search
from sidecar_tools.bench.dataset import Message

COPY_BATCH = 512
Log = Any


@dataclass(frozen=True)
class ScaleOptions:
    corpus: Path | None
    messages: int
    copies: int
    search_seconds: float = 20.0
    clients: int = 8
    raw_seconds: float = 5.0
    # Also measure with one client: latency without queueing for the cores (the floor that
    # the 8-client figures add their wait to), and the API's own overhead without contention.
    unqueued: bool = True
    workdir: Path = Path(".sidecar/bench")
    server: bool = True  # measure a Qdrant server too (SIDECAR_QDRANT_URL or the shared binary)


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
    # A busy shared node answers 429 (circuit breaker) now and then: resend with backoff.
    for ok, _ in helpers.streaming_bulk(client, actions(), chunk_size=500, raise_on_error=True,
                                        max_retries=8, initial_backoff=2, max_backoff=30):
        written += int(ok)
    client.indices.refresh(index=alias)
    return written


def copy_points(settings: Settings, copies: int) -> tuple[int, int]:
    """Every point of the collection, ``copies`` times with other mailbox ids and point ids;
    returns (points before, points written)."""
    index = factories.vector_index(settings)
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
        factories.vector_index.cache_clear()


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
    out: dict[str, Any] = {"messages": len(data.messages), "copies": opts.copies,
                           "clients": opts.clients}
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
        points_started = time.perf_counter()
        out["points_original"], out["points_copied"] = copy_points(settings, opts.copies)
        out["copy_points_s"] = time.perf_counter() - points_started
        out["copy_s"] = time.perf_counter() - started
        client = build_opensearch(settings)
        out["indexed_documents"] = int(client.count(index=settings.opensearch_index)["count"])
        work = search.Workload(
            mailbox,
            queries.fulltext_queries(data.messages, mailbox),
            queries.free_text_queries(data.messages, mailbox),
            queries.similar_keys(data.messages, mailbox),
        )
        out["points_per_s"] = out["points_copied"] / max(out["copy_points_s"], 1e-9)
        embedder = build_embedder(settings)
        out.update(_measure(settings, embedder, data.messages, work, opts, run_dir, log))
        if opts.server:
            with _server(settings, run_dir) as server_settings:
                log("scale: the same points copied into a Qdrant server")
                out["server_points"], out["server_copy_s"] = copy_to_server(
                    settings, server_settings)
                out["server_points_per_s"] = out["server_points"] / max(
                    out["server_copy_s"], 1e-9)
                measured = _measure(server_settings, embedder, data.messages, work, opts,
                                    run_dir, log)
                out.update({k.replace("api", "api_server", 1).replace("raw", "raw_server", 1): v
                            for k, v in measured.items()})
    finally:
        limits.drop_index(build_opensearch(base), settings.opensearch_index)
        shutil.rmtree(run_dir, ignore_errors=True)
    return out


def _measure(settings: Settings, embedder: Embedder, messages: Sequence[Message],
             work: search.Workload, opts: ScaleOptions, run_dir: Path, log: Log) -> dict[str, Any]:
    """The raw engine calls, then the API's four modes, on this settings' vector backend, with
    ``opts.clients`` clients (keys ``raw``, ``api``) and, if ``opts.unqueued``, one client
    (``raw_1``, ``api_1``); ``api_rss_mib`` the API's peak RSS. Raw first: the embedded store
    has one owner, and the API must not be running while this process holds it."""
    backend = "server" if settings.qdrant_url else "embedded Edge"
    counts = [(opts.clients, "")] + ([(1, "_1")] if opts.unqueued and opts.clients != 1 else [])
    out: dict[str, Any] = {}
    for clients, suffix in counts:
        log(f"scale: raw engine calls on {backend}, {clients} clients x "
            f"{opts.raw_seconds:.0f}s each")
        out["raw" + suffix] = search.measure_raw(settings, embedder, work, messages,
                                                 clients=clients, seconds=opts.raw_seconds)
    api = search.start_api(settings, work.mailbox, 0, run_dir / "api.log")
    try:
        for clients, suffix in counts:
            log(f"scale: API on {backend}, {clients} clients x {opts.search_seconds:.0f}s/mode")
            out["api" + suffix] = search.measure_api(api, work, clients=clients,
                                                     seconds=opts.search_seconds)
    finally:
        out["api_rss_mib"] = search.stop_api(api)
    return out


@contextmanager
def _server(settings: Settings, run_dir: Path) -> Iterator[Settings]:
    """``SIDECAR_QDRANT_URL`` when set, else a server of the shared binary for this run."""
    if settings.qdrant_url:
        yield settings
        return
    from sidecar_tools.stack.qdrant_server import server_binary, start_server

    binary = server_binary()
    if binary is None:
        raise RuntimeError("bench-scale: no Qdrant server (SIDECAR_QDRANT_URL or "
                           "SIDECAR_QDRANT_BIN); run with --no-server to skip it")
    server = start_server(binary, run_dir / "qdrant-server")
    try:
        yield settings.model_copy(update={"qdrant_url": server.url,
                                          "qdrant_grpc_port": server.grpc_port})
    finally:
        server.stop()


def copy_to_server(embedded: Settings, server: Settings) -> tuple[int, float]:
    """Every point of the embedded collection (and cache) into the server: (points, seconds)."""
    from indexer.adapters.embedding.embedder import DIMENSION
    from indexer.adapters.qdrant.index import VectorIndex, build_store

    began, copied = time.perf_counter(), 0
    source, target = build_store(embedded), build_store(server)
    try:
        index = VectorIndex(target, server.qdrant_collection, factories.vector_slug(server),
                            DIMENSION)
        index.ensure()
        own = VectorIndex(source, embedded.qdrant_collection,
                          factories.vector_slug(embedded), DIMENSION)
        for src, dst in ((own.alias, index.alias), (own.cache, index.cache)):
            for page in source.scroll(src, None, None, with_vector=True):
                target.upsert(dst, [PointWrite(p.id, p.vector or [], p.payload) for p in page])
                copied += len(page) if src == own.alias else 0
    finally:
        source.close()
        target.close()
    return copied, time.perf_counter() - began
