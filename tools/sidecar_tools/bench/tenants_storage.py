"""``sidecar bench-tenants``' storage figures: bytes per message and per point, and recall.

OpenSearch's store per message and its documents per primary; per vector layout (the int8 one
the product builds and, with ``compare_float32``, the float32 one copied beside it from the
same points) the RSS a searching owner gains (:func:`edge_rss`: a fresh process for Edge; the
server process over its empty start), the collection's disk, and recall@10 of the API's
vector search against an exact search. One module because each layout's figures are measured
the same way and read side by side by the capacity model.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from indexer.adapters import factories
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.vectors import PointWrite, VectorStore, match
from indexer.settings import Settings
from search_api.service import DEPTH
from sidecar_tools.bench.tenants_measure import ClassWork
from sidecar_tools.bench.tenants_options import Log, TenantOptions
from sidecar_tools.bench.tenants_process import (
    proc_rss,
    qdrant_server,
    settings_for_server,
    started_server,
)
from sidecar_tools.bench.timing import percentile

# --- the vector layouts ------------------------------------------------------------------------


def settle(store: VectorStore, collection: str) -> float:
    began = time.perf_counter()
    store.settle(collection)  # type: ignore[attr-defined]
    return time.perf_counter() - began


def copy_float32(source: VectorStore, collection: str, target: VectorStore, name: str,
                 dim: int) -> tuple[int, float]:
    """Every point of ``collection`` into ``name`` of the float32 layout (the layout before
    issue 39) on ``target``; returns (points, seconds including the index build)."""
    began, copied = time.perf_counter(), 0
    target.create(name, dim, ("thread_key", "message_key"))
    for page in source.scroll(collection, None, None, with_vector=True):
        target.upsert(name, [PointWrite(p.id, p.vector or [], p.payload) for p in page])
        target.flush()
        copied += len(page)
    settle(target, name)
    return copied, time.perf_counter() - began


def recall(store: VectorStore, collection: str, mailbox: str,
           vectors: Sequence[Sequence[float]]) -> dict[str, float]:
    """recall@10 of the API's vector search (depth ``DEPTH``, its top 10) against an exact
    search of the same mailbox, and both searches' p50 (ms)."""
    found, fast, slow = [], [], []
    flt = match("mailbox_id", mailbox)
    for vector in vectors:
        began = time.perf_counter()
        approx = [h.id for h in store.search(collection, vector, flt, DEPTH)][:10]
        fast.append(time.perf_counter() - began)
        began = time.perf_counter()
        exact = [h.id for h in store.search(collection, vector, flt, 10,  # type: ignore[call-arg]
                                            exact=True)]
        slow.append(time.perf_counter() - began)
        if exact:
            found.append(len(set(approx) & set(exact)) / len(exact))
    return {"recall_at_10": sum(found) / len(found) if found else float("nan"),
            "queries": len(found),
            "search_p50_ms": percentile([s * 1000 for s in fast], 50),
            "exact_p50_ms": percentile([s * 1000 for s in slow], 50)}


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


_RSS_CHILD = """
import json, sys
from pathlib import Path
from indexer.adapters.qdrant.edge import EdgeStore
from indexer.core.vectors import match
def rss():
    found = {}
    for line in open('/proc/self/status'):
        if line.startswith(('VmRSS:', 'RssAnon:', 'RssFile:')):
            name, value = line.split(':')
            found[name] = int(value.split()[0]) * 1024
    return found
args = json.loads(Path(sys.argv[1]).read_text())
store = EdgeStore(Path(args['root']))
before = rss()
for vector in args['vectors']:
    for box in args['mailboxes']:
        store.search(args['collection'], vector, match('mailbox_id', box), args['depth'])
after = rss()
print(json.dumps({'before': before['VmRSS'], 'after': after['VmRSS'],
                  'anon': after['RssAnon'] - before['RssAnon'],
                  'file': after['RssFile'] - before['RssFile']}))
store.close()
"""


def edge_rss(root: Path, collection: str, mailboxes: Sequence[str],
             vectors: Sequence[Sequence[float]]) -> dict[str, int]:
    """RSS (bytes) a fresh process gains by opening the Edge shard and searching every
    mailbox class with every query vector (the steady state of a searching owner), and how
    much of it is anonymous memory (``rss_anon``: heap, int8 vectors kept in RAM) and
    file-backed pages (``rss_file``: mmapped segments and WAL, page cache the kernel can drop
    and read again)."""
    args = root.parent / f".rss-{root.name}.json"  # the vectors are too long for argv
    args.write_text(json.dumps({"root": str(root), "collection": collection,
                                "mailboxes": list(mailboxes),
                                "vectors": [list(v) for v in vectors], "depth": DEPTH}))
    done = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(args)], capture_output=True,
                          text=True, check=True, timeout=900)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"rss_before": int(found["before"]), "rss_after": int(found["after"]),
            "rss_anon": int(found["anon"]), "rss_file": int(found["file"])}


# --- the figures -------------------------------------------------------------------------------


def storage_figures(settings: Settings, opts: TenantOptions, run_dir: Path, index: VectorIndex,
             collection: str, work: Mapping[str, ClassWork],
             qvec: Mapping[str, Sequence[Sequence[float]]], servers: list[Any],
             log: Log) -> dict[str, Any]:
    """OpenSearch bytes per message; Qdrant RSS and disk per point for the int8 layout and,
    with ``compare_float32``, the float32 one built beside it from the same points."""
    client = build_opensearch(settings)
    stats = client.indices.stats(index=settings.opensearch_index, metric="store,docs")
    prim = stats["_all"]["primaries"]
    docs = int(prim["docs"]["count"])
    out: dict[str, Any] = {"opensearch": {
        "documents": docs, "store_bytes": int(prim["store"]["size_in_bytes"]),
        "store_bytes_per_message": int(prim["store"]["size_in_bytes"]) / max(docs, 1),
        "shards": opts.shards,
        # documents per primary: how unevenly the mailboxes (the whale) fill the shards
        "primary_documents": sorted(
            (int(row["docs"] or 0) for row in client.cat.shards(
                index=settings.opensearch_index, format="json") if row["prirep"] == "p"),
            reverse=True)}}
    boxes = [w.mailbox for w in work.values()]
    vectors = [v for vs in qvec.values() for v in vs[:10]]
    points = index.store.count(collection, None)
    layouts: dict[str, Any] = {}
    if opts.backend == "edge":
        store = index.store
        root = settings.qdrant_path
        if opts.compare_float32:
            log("tenants: the same points into a float32 Edge store beside it")
            old = build_store(settings.model_copy(update={"qdrant_path": run_dir / "f32"}))
            old.compact = False  # type: ignore[attr-defined]
            copied, spent = copy_float32(store, collection, old, collection, index.dim)
            out["recall_float32"] = {cls: recall(old, collection, w.mailbox, qvec[cls])
                                     for cls, w in work.items()}
            old.close()
            layouts["float32"] = {"points": copied, "build_s": spent,
                                  **_edge_figures(run_dir / "f32", collection, boxes, vectors,
                                                  copied)}
        index.close()
        factories.vector_index.cache_clear()
        layouts["int8"] = _edge_figures(root, collection, boxes, vectors, points)
        layouts["int8"]["points"] = points
    else:
        layouts["int8"] = _server_figures(settings, collection, boxes, vectors, points)
        layouts["int8"]["points"] = points
        if opts.compare_float32:
            log("tenants: the same points into a float32 collection on a second server")
            stack = qdrant_server(run_dir, "qdrant-f32")
            server = stack.__enter__()
            servers.append(stack)
            other = settings_for_server(settings, server)
            old = build_store(other)
            old.compact = False  # type: ignore[attr-defined]
            copied, spent = copy_float32(index.store, collection, old, collection, index.dim)
            out["recall_float32"] = {cls: recall(old, collection, w.mailbox, qvec[cls])
                                     for cls, w in work.items()}
            layouts["float32"] = {"points": copied, "build_s": spent,
                                  **_server_figures(other, collection, boxes, vectors, copied)}
            old.close()
        index.close()
    out["qdrant"] = layouts
    return out


def _edge_figures(root: Path, collection: str, boxes: Sequence[str],
                  vectors: Sequence[Sequence[float]], points: int) -> dict[str, Any]:
    rss = edge_rss(root, collection, boxes, vectors)
    disk = _du(root / "collections" / collection)
    gained = rss["rss_after"] - rss["rss_before"]
    return {**rss, "rss_bytes": gained, "rss_bytes_per_point": gained / max(points, 1),
            "rss_anon_bytes_per_point": rss["rss_anon"] / max(points, 1),
            "disk_bytes": disk, "disk_bytes_per_point": disk / max(points, 1)}


def _server_figures(settings: Settings, collection: str, boxes: Sequence[str],
                    vectors: Sequence[Sequence[float]], points: int) -> dict[str, Any]:
    """RSS the server process gained over its empty start after building the collection and
    searching every class, and the collection's directory on disk. The server keeps what
    its build left resident (the Edge figures come from a fresh process)."""
    started = started_server(settings)
    if started is None:
        raise RuntimeError(f"no Qdrant server of this run at {settings.qdrant_url}")
    pid, empty, storage = started
    store = build_store(settings)
    try:
        for vector in vectors:
            for box in boxes:
                store.search(collection, vector, match("mailbox_id", box), DEPTH)
        rss = proc_rss(pid)
    finally:
        store.close()
    folder = storage / "collections" / collection
    disk = _du(folder) if folder.is_dir() else 0
    return {"rss_before": empty, "rss_after": rss, "rss_bytes": rss - empty,
            "rss_bytes_per_point": (rss - empty) / max(points, 1),
            "disk_bytes": disk, "disk_bytes_per_point": disk / max(points, 1)}
