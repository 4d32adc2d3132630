"""Query encoding while documents are being encoded, in one process (the Edge layout: the API
and a vectors worker share the CPU and, before issue 42, the encoder session).

``clients`` threads each send short queries one after another through the API's
micro-batcher (:class:`indexer.adapters.embedding.query_batch.QueryBatcher`), while one thread
encodes
document batches of real mail without pause. Four modes, one after the other in one run:
``idle`` (no documents: the floor), ``shared`` (queries on the documents' session and
nothing held back: what a process did before), ``own_same_priority`` (their own small session,
documents yielding between batches but encoded at the caller's priority: 2026-12-04) and
``own`` (the shipped path, :meth:`Embedder.embed_query`: the same, and documents encoded on a
thread of their own at nice >= 10, so a query preempts a batch already running).
Reports query-encoding p50/p99 (ms) and the documents' texts/s in each mode.

Run: ``.venv/bin/python -m sidecar_tools.bench.query_load [seconds] [precision]``.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexer.adapters.embedding.embedder import Embedder, with_precision
from indexer.adapters.embedding.query_batch import QueryBatcher

CORPUS = (Path(__file__).resolve().parents[3] / "tests" / "data" / "corpora"
          / "linux-mips-4k.jsonl.gz")
QUERIES = ["cache flush on r4k", "kernel panic at boot on malta", "smp irq affinity",
           "octeon ethernet driver", "fix the build with gcc 8", "dma coherent memory",
           "tlb refill handler", "device tree for the ci20 board"]


def _texts(n: int) -> list[str]:
    seen: dict[str, None] = {}
    with gzip.open(CORPUS, "rt", encoding="utf-8") as lines:
        for line in lines:
            text = str((json.loads(line).get("content") or {}).get("forAI") or "")
            if text.strip():
                seen.setdefault(text)
            if len(seen) == n:
                break
    return list(seen)


def run_mode(embedder: Embedder, encode_query: Callable[[Sequence[str]], list[list[float]]],
             docs: list[str] | None, seconds: float, clients: int) -> dict[str, Any]:
    batcher = QueryBatcher(encode_query)
    stop = threading.Event()
    latencies: list[float] = []
    done_docs = [0]

    def client(n: int) -> None:
        i = n
        while not stop.is_set():
            started = time.perf_counter()
            batcher.embed_query([QUERIES[i % len(QUERIES)]])
            latencies.append(time.perf_counter() - started)
            i += 1

    def indexer() -> None:
        assert docs is not None
        i = 0
        while not stop.is_set():
            batch = docs[i % len(docs) : i % len(docs) + 64] or docs[:64]
            embedder.embed(batch)
            done_docs[0] += len(batch)
            i += 64

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    if docs is not None:
        threads.append(threading.Thread(target=indexer))
    started = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    batcher.close()
    elapsed = time.perf_counter() - started
    ms = np.asarray(latencies) * 1000
    return {"queries": len(ms), "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)), "docs_per_s": done_docs[0] / elapsed}


def main(seconds: float = 30.0, precision: str = "float32", clients: int = 8) -> dict[str, Any]:
    embedder = Embedder(max_tokens=256, threads=2, batch_size=32,
                        model=with_precision("", precision))
    docs = _texts(400)
    embedder.embed_query(["warm-up"])
    embedder.embed(docs[:4])

    def shared(texts: Sequence[str]) -> list[list[float]]:
        return embedder._encode(embedder.document_encoder(), texts, embedder.info.query_prompt)

    # the same, but documents at the caller's priority (issue 42's first step, 2026-12-04)
    same = Embedder(max_tokens=256, threads=2, batch_size=32, document_nice=0,
                    model=with_precision("", precision))
    same.embed_query(["warm-up"])
    same.embed(docs[:4])
    result = {
        "precision": precision, "clients": clients, "seconds": seconds,
        "idle": run_mode(embedder, embedder.embed_query, None, seconds, clients),
        "shared": run_mode(embedder, shared, docs, seconds, clients),
        "own_same_priority": run_mode(same, same.embed_query, docs, seconds, clients),
        "own": run_mode(embedder, embedder.embed_query, docs, seconds, clients),
    }
    return result


if __name__ == "__main__":
    args = sys.argv[1:]
    out = main(float(args[0]) if args else 30.0, args[1] if len(args) > 1 else "float32")
    print(json.dumps(out, indent=2))
