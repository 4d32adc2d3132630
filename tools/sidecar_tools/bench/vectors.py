"""``sidecar bench-vectors``: the vector store backends side by side on the same data and queries.

Backends, all through the sidecar's own adapters (:mod:`indexer.core.vectors`):

- ``edge``: Qdrant Edge embedded in this process (the default embedded store);
- ``server``: a real Qdrant server (``SIDECAR_QDRANT_URL``, or the binary of
  ``../shared/tools/qdrant`` started on free loopback ports for the run);
- ``local``: qdrant-client's local mode (``QdrantClient(path=…)``), the embedded store of
  earlier versions, for the old-vs-new ratio.

Data: N random 384-d unit vectors, mailbox = i % 20, payload as the sidecar writes. Each backend
gets the same points in batches of 64 (points/s), then the same filtered top-20 queries
(mailbox filter; and with must_not on thread_key/message_key as "similar" sends) from
``clients`` threads for ``seconds`` each: p50/p95/p99 of each call.
"""

from __future__ import annotations

import math
import random
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from indexer.adapters.qdrant.edge import EdgeStore
from indexer.adapters.qdrant.index import KEYWORD_FIELDS, build_store
from indexer.core.vectors import Filter, Match, PointWrite, VectorStore, match
from indexer.settings import Settings

DIM, BATCH, MAILBOXES, TOP = 384, 64, 20, 20


def _unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def make_points(n: int, seed: int = 1) -> list[PointWrite]:
    rng = random.Random(seed)
    return [
        PointWrite(str(uuid.uuid5(uuid.NAMESPACE_URL, f"bench-{i}")), _unit(rng),
                   {"mailbox_id": f"box{i % MAILBOXES}", "thread_key": f"t{i % 997}",
                    "message_key": f"m{i}", "ts": i, "content_hash": f"h{i}"})
        for i in range(n)
    ]


@contextmanager
def open_backend(name: str, base: Settings, workdir: Path) -> Iterator[VectorStore]:
    if name == "edge":
        store: VectorStore = EdgeStore(workdir / "edge", optimize_after=base.qdrant_optimize_after)
        yield store
        store.close()
    elif name == "local":
        from qdrant_client import QdrantClient

        from indexer.adapters.qdrant.server import ServerStore

        store = ServerStore(QdrantClient(path=str(workdir / "local")), "local mode")
        yield store
        store.close()
    elif base.qdrant_url:
        store = build_store(base)
        yield store
        store.close()
    else:
        from sidecar_tools.stack.qdrant_server import server_binary, start_server

        binary = server_binary()
        if binary is None:
            raise RuntimeError("no Qdrant server: set SIDECAR_QDRANT_URL or SIDECAR_QDRANT_BIN")
        server = start_server(binary, workdir / "server")
        store = build_store(base.model_copy(update={"qdrant_url": server.url}))
        try:
            yield store
        finally:
            store.close()
            server.stop()


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0}

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    return {"n": len(ordered), "p50_ms": at(0.50), "p95_ms": at(0.95), "p99_ms": at(0.99)}


def closed_loop(call: Callable[[int], object], clients: int, seconds: float) -> dict[str, float]:
    """``clients`` threads calling ``call(i)`` back to back for ``seconds``: latencies."""
    samples: list[float] = []
    errors = [0]
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        i = k
        while time.monotonic() < stop:
            began = time.perf_counter()
            try:
                call(i)
            except Exception:  # counted, the run goes on
                errors[0] += 1
                continue
            samples.append(time.perf_counter() - began)
            i += clients

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {**_percentiles(samples), "errors": errors[0], "rps": len(samples) / seconds}


def measure(store: VectorStore, pts: list[PointWrite], clients: int, seconds: float,
            log: Callable[[str], None]) -> dict[str, Any]:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    store.create(name, DIM, KEYWORD_FIELDS)
    began = time.perf_counter()
    for start in range(0, len(pts), BATCH):
        store.upsert(name, pts[start : start + BATCH])
        store.flush()
    insert_s = time.perf_counter() - began
    log(f"  {len(pts)} points in {insert_s:.1f}s")
    rng = random.Random(2)
    queries = [_unit(rng) for _ in range(64)]

    def filtered(i: int) -> object:
        return store.search(name, queries[i % 64], match("mailbox_id", f"box{i % MAILBOXES}"), TOP)

    def similar(i: int) -> object:
        own = pts[(i * 7919) % len(pts)]
        flt = Filter(must=(Match("mailbox_id", own.payload["mailbox_id"]),),
                     must_not=(Match("thread_key", own.payload["thread_key"]),
                               Match("message_key", own.payload["message_key"])))
        return store.search(name, own.vector, flt, TOP)

    out: dict[str, Any] = {"points": len(pts), "insert_points_s": len(pts) / insert_s}
    for label, call in (("filtered_top20", filtered), ("similar_must_not", similar)):
        out[label] = closed_loop(call, clients, seconds)
        log(f"  {label}: {out[label]}")
    agree = [[h.id for h in store.search(name, q, match("mailbox_id", "box3"), TOP)]
             for q in queries[:10]]
    out["answers"] = agree
    store.drop(name)
    return out


def run(backends: list[str], points: int, clients: int, seconds: float, base: Settings,
        log: Callable[[str], None]) -> dict[str, Any]:
    pts = make_points(points)
    workdir = Path(tempfile.mkdtemp(prefix="bench-vectors-"))
    results: dict[str, Any] = {"points": points, "clients": clients, "seconds": seconds}
    try:
        for name in backends:
            log(f"{name}:")
            with open_backend(name, base, workdir) as store:
                results[name] = measure(store, pts, clients, seconds, log)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    first = results[backends[0]]["answers"]
    for name in backends:
        got = results[name].pop("answers")
        same = sum(len(set(a) & set(b)) for a, b in zip(first, got, strict=True))
        results[name]["top20_agreement_with_" + backends[0]] = same / (TOP * len(first))
    return results
