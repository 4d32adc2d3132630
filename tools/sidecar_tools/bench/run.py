"""Run every stage of ``sidecar bench`` in one process and collect the raw figures.

Order matters on a 2-core machine: each stage runs alone (nothing else of ours is busy), the
full pipeline runs before the full-text-only path so the latter cannot warm OpenSearch for it,
and the raw search calls run before the API because both want the embedded Qdrant store.
With ``compare_runtime``, the other encoder runtime's limit runs right after this one's, then
its pipeline: second, so on an OpenSearch the first pipeline already warmed (if anything, a
bias in the other runtime's favour).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.embedding.embedder import Embedder, build_embedder
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.settings import Settings
from sidecar_tools.bench import corpus as corpus_mod
from sidecar_tools.bench import (
    cost,
    dataset,
    limits,
    peers,
    pipeline,
    queries,
    runtimes,
    search,
)
from sidecar_tools.bench.cost import CostOptions
from sidecar_tools.bench.report import NOTMUCH_HINT


@dataclass(frozen=True)
class Options:
    corpus: Path | None
    messages: int
    naive_messages: int = 500
    encoder_texts: int = 1000  # a rate: a sample of the texts measures it as well as all of them
    search_seconds: float = 20.0
    raw_seconds: float = 5.0
    clients: int = 8
    api_port: int = 0  # 0: a free port
    workdir: Path = Path(".sidecar/bench")
    compare_runtime: runtimes.Runtime | None = None  # also the encoder limit and pipeline on it
    cost_messages: int = 200  # the bill per message per path (bench-cost) on as many; 0: skip


Log = Any  # a callable(str) -> None for progress lines


def _embedder(settings: Settings) -> Embedder:
    return build_embedder(settings)


def _machine() -> dict[str, Any]:
    mem_kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return {
        "cores": os.cpu_count(),
        "ram_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _pipeline_stages(
    opts: Options, base: Settings, data: dataset.Dataset, run_dir: Path, run_id: str, log: Log
) -> tuple[Settings, dict[str, Any]]:
    out: dict[str, Any] = {}
    expected = len(data.messages)
    full = pipeline.namespace(base, data.table, run_id, "full", run_dir)
    workers = pipeline.start_workers(full, ("fulltext", "vectors"), run_dir / "workers.log")
    try:
        log(f"pipeline: {expected} messages, workers warm in {workers.warm_s:.1f}s")
        out["pipeline"] = pipeline.ingest(full, data.stream, expected, fulltext_only=False)
        log(f"re-delivery of {data.records} records")
        out["redelivery"] = pipeline.ingest(full, data.stream, expected, fulltext_only=False)
        out["worker_rss_mib"] = workers.peak_rss_mib()
        out["workers_warm_s"] = workers.warm_s
    finally:
        pipeline.stop(workers)
    ft = pipeline.namespace(base, data.table, run_id, "ft", run_dir)
    workers = pipeline.start_workers(ft, ("fulltext",), run_dir / "workers.log")
    try:
        log("full-text-only path")
        out["fulltext_only"] = pipeline.ingest(ft, data.stream, expected, fulltext_only=True)
    finally:
        pipeline.stop(workers)
        factories.redis_client(ft).delete(ft.vectors_queue)
    return full, out


def _encoder_texts(opts: Options, data: dataset.Dataset) -> list[str]:
    """The distinct non-empty ``forai`` texts the encoder limit runs on (every runtime's)."""
    texts = dict.fromkeys(m.forai for m in data.messages if m.forai and m.forai.strip())
    return [t for t in texts if t][: opts.encoder_texts]


def _limits(
    opts: Options, full: Settings, embedder: Embedder, data: dataset.Dataset, run_id: str,
    log: Log,
) -> dict[str, Any]:
    texts = _encoder_texts(opts, data)
    log(f"encoder limit: {len(texts)} distinct forai texts")
    encoder = limits.encoder_limit(embedder, texts, full.batch_messages)
    client = build_opensearch(full)
    docs = limits.written_documents(client, full.opensearch_index)
    log(f"bulk limit: {len(docs)} documents")
    bulk = limits.bulk_limit(client, f"bench-{run_id}-bulk", docs)
    return {"encoder": encoder, "bulk": bulk, "indexed_documents": len(docs)}


def _peers(
    opts: Options,
    base: Settings,
    embedder: Embedder,
    data: dataset.Dataset,
    run_dir: Path,
    run_id: str,
    log: Log,
) -> dict[str, Any]:
    subset = {m.ref for m in data.messages[: opts.naive_messages]}
    records = peers.subset_records(data.stream, subset)
    log(f"naive peer: {len(subset)} messages, {len(records)} records")
    naive_ns = pipeline.namespace(base, data.table, run_id, "naive", run_dir)
    naive = peers.naive_peer(naive_ns, build_opensearch(naive_ns), embedder, records, len(subset))
    log("notmuch peer")
    notmuch = peers.notmuch_peer((m.email for m in data.messages), run_dir / "notmuch")
    if notmuch is None:
        log(f"notmuch peer: {NOTMUCH_HINT}")
    return {"naive": naive, "naive_records": len(records), "notmuch": notmuch}


def _search(
    opts: Options,
    full: Settings,
    embedder: Embedder,
    data: dataset.Dataset,
    run_dir: Path,
    log: Log,
) -> dict[str, Any]:
    mailbox = data.messages[0].ref.mailbox_id
    work = search.Workload(
        mailbox,
        queries.fulltext_queries(data.messages, mailbox),
        queries.free_text_queries(data.messages, mailbox),
        queries.similar_keys(data.messages, mailbox),
    )
    log(f"search: raw engine calls, {opts.clients} clients x {opts.raw_seconds:.0f}s each")
    raw = search.measure_raw(
        full, embedder, work, data.messages, clients=opts.clients, seconds=opts.raw_seconds
    )
    api = search.start_api(full, mailbox, opts.api_port, run_dir / "api.log")
    try:
        log(f"search: API, {opts.clients} clients x {opts.search_seconds:.0f}s per mode")
        measured = search.measure_api(api, work, clients=opts.clients, seconds=opts.search_seconds)
    finally:
        api_rss = search.stop_api(api)
    return {"raw": raw, "api": measured, "api_rss_mib": api_rss, "queries": work.__dict__}


def _compare(
    other: runtimes.Runtime,
    opts: Options,
    base: Settings,
    embedder: Embedder,
    data: dataset.Dataset,
    result: dict[str, Any],
    run_dir: Path,
    run_id: str,
    log: Log,
) -> list[runtimes.RuntimeFigures]:
    """This run's runtime (its figures as measured above) next to ``other``, measured now:
    its encoder limit right after this runtime's (so the two see the same machine load), then
    its own pipeline in a fresh namespace."""
    log(f"--compare-runtime {other}: encoder limit, then the pipeline with its vectors worker")
    own = runtimes.RuntimeFigures(
        base.embed_runtime, embedder.dtype, result["limits"]["encoder"],
        result["pipeline"]["pipeline"], result["pipeline"]["workers_warm_s"],
    )
    measured = runtimes.measure(other, base, data, _encoder_texts(opts, data), run_dir, run_id)
    return [own, measured]


def _cost(opts: Options, base: Settings, corpus: Path | None, log: Log) -> dict[str, Any]:
    """The bill per message of every indexing path (``sidecar bench-cost``'s stage, on the
    corpus's first ``cost_messages`` messages — the shipped demo mailbox's without the shared
    corpus — in a table of its own): DynamoDB, Streams, S3
    and OpenSearch requests and units against M1, priced in the report."""
    messages = min(opts.cost_messages, opts.messages)
    log(f"cost: the bill per message of each indexing path, {messages} messages")
    return cost.run(CostOptions(corpus=corpus, messages=messages,
                                workdir=opts.workdir / "cost"), base, log)


def cleanup(base: Settings, run_id: str, run_dir: Path) -> None:
    """Drop everything this run created except the reusable table and stream."""
    client, ddb = build_opensearch(base), aws.client(base, "dynamodb")
    for tag in ("full", "ft", "naive", "bulk", runtimes.TAG):
        limits.drop_index(client, f"bench-{run_id}-{tag}")
        with contextlib.suppress(ClientError):  # never created for this tag
            ddb.delete_table(TableName=f"bench-{run_id}-{tag}-state")
    shutil.rmtree(run_dir, ignore_errors=True)


def run(opts: Options, base: Settings, log: Log) -> dict[str, Any]:
    """Every stage; returns the raw figures (see :mod:`sidecar_tools.bench.report` for ratios)."""
    started = time.perf_counter()
    path = opts.corpus if opts.corpus is not None else corpus_mod.default_corpus()
    chosen = corpus_mod.select(path, opts.messages, opts.workdir / "corpus")
    log(f"corpus {chosen.source}: {chosen.messages} messages, key {chosen.key}")
    data = dataset.prepare(base, chosen, opts.workdir / "corpus" / chosen.key)
    log(
        f"table {data.table}: {data.records} stream records "
        f"({'reused; the first load took' if data.reused else 'loaded in'} {data.load_s:.0f}s)"
    )
    run_id = uuid.uuid4().hex[:8]
    run_dir = opts.workdir / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    embedder = _embedder(base)
    result: dict[str, Any] = {
        "machine": _machine(),
        "options": opts,
        "corpus": chosen,
        "dataset": data,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    try:
        full, result["pipeline"] = _pipeline_stages(opts, base, data, run_dir, run_id, log)
        result["limits"] = _limits(opts, full, embedder, data, run_id, log)
        if opts.compare_runtime is not None:
            result["runtimes"] = _compare(
                opts.compare_runtime, opts, base, embedder, data, result, run_dir, run_id, log
            )
        result["peers"] = _peers(opts, base, embedder, data, run_dir, run_id, log)
        result["search"] = _search(opts, full, embedder, data, run_dir, log)
        if opts.cost_messages:
            result["cost"] = _cost(opts, base, path, log)
    finally:
        cleanup(base, run_id, run_dir)
    result["total_s"] = time.perf_counter() - started
    return result
