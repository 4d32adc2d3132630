"""The vector store port embedded in the process: Qdrant Edge (``qdrant-edge-py``), Qdrant's own
Rust engine — the segment, WAL and payload-index code of the server — with no server.

Edge has no collections or aliases: one *shard* lives in one directory. So the store is a
directory holding ``collections/<name>/`` (one shard per collection), ``aliases.json`` (alias →
collection, replaced atomically), ``edge.json`` (what wrote it) and ``.lock``. The lock is taken
with ``flock`` *before* any shard is opened: a second ``EdgeShard.load`` of a directory a live
process owns fails on the WAL lock, but only after it has touched that owner's payload-index
files (seen with 0.9.0: the owner's next ``flush`` failed). So one process owns the store, as
with the old local mode, and a second one gets :class:`StoreBusyError` at once.

Writes are made durable by :meth:`EdgeStore.flush` at the end of every batch that wrote (Edge
fsyncs only then; the WAL replays anything since). Edge never optimizes by itself: after
``optimize_after`` points written to a collection, ``optimize()`` runs in a background thread
(it releases the GIL; writes and searches go on, new points are searchable before it ends).
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from indexer.adapters.qdrant.edge_codec import classified, stored, to_filter
from indexer.adapters.qdrant.edge_dir import EdgeDirectory
from indexer.core.vectors import SEARCH_EF, Filter, Hit, PointWrite, StoredPoint


# The layout of the shards this store creates: the server's (see ``qdrant_server.TENANT_HNSW``
# and ``INT8``; docs/operations/capacity.md). Edge runs the server's segment code and takes
# the same knobs: no global graph (``m`` 0), one graph per mailbox (``payload_m`` 16 on the
# ``is_tenant`` index), int8 scalar quantization kept in RAM and the float32 originals on disk
# (mmap, read back to rescore), and the per-point keyword indexes on disk.
# ``full_scan_threshold`` (KB) and ``ef_construct`` are the server's defaults (Edge's
# constructor asks for them).
def tenant_hnsw() -> qe.HnswIndexConfig:
    return qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000, payload_m=16)


def int8() -> qe.ScalarQuantizationConfig:
    return qe.ScalarQuantizationConfig(qe.ScalarType.Int8, quantile=0.99, always_ram=True)


def _search_params(exact: bool) -> qe.SearchParams:
    """Rescore with the originals (oversampling 2) at beam :data:`SEARCH_EF`, as on the
    server; ``exact``: every matching point scored with the originals."""
    if exact:  # ``ignore``: an int8 shard's exact search would otherwise score in int8
        return qe.SearchParams(exact=True, quantization=qe.QuantizationSearchParams(ignore=True))
    return qe.SearchParams(hnsw_ef=SEARCH_EF,
                           quantization=qe.QuantizationSearchParams(rescore=True, oversampling=2.0))


def _build_shard(path: Path, dim: int, keyword_fields: Sequence[str], *, compact: bool) -> None:
    """A new shard at ``path`` with its payload indexes, built aside and renamed into place:
    a collection exists whole, with its indexes, or not."""
    if compact:
        params = qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine, on_disk=True,
                                     quantization_config=int8())
        config = qe.EdgeConfig(vectors=params, hnsw_config=tenant_hnsw())
    else:
        config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine))
    staging = path.with_name(f".{path.name}.new")
    shutil.rmtree(staging, ignore_errors=True)
    shard = qe.EdgeShard.create(str(staging), config)
    tenant = qe.KeywordIndexParams(is_tenant=True)
    shard.update(qe.UpdateOperation.create_field_index("mailbox_id", tenant))
    # the other keyword indexes (thread and message keys: a value per point) on disk in the
    # compact layout: in RAM they were 0.68 KB of every point's 1.4 KB (capacity.md)
    lookup = qe.KeywordIndexParams(on_disk=True) if compact else qe.PayloadSchemaType.Keyword
    for name in keyword_fields:
        shard.update(qe.UpdateOperation.create_field_index(name, lookup))
    shard.flush()
    shard.close()
    os.replace(staging, path)


class EdgeStore:
    """:class:`indexer.core.vectors.VectorStore` on Edge shards in one directory.

    ``compact``: shards it creates get per-tenant graphs and int8 vectors with the originals
    on disk (False: the float32 layout with a global graph that shards had before; the
    benchmark builds both). A shard keeps the layout it was created with.
    """

    def __init__(self, root: Path, *, optimize_after: int = 20_000, compact: bool = True) -> None:
        self.root, self.optimize_after, self.compact = root, optimize_after, compact
        self._files = EdgeDirectory(root)
        self._shards: dict[str, qe.EdgeShard] = {}
        self._written: dict[str, int] = {}
        self._dirty: set[str] = set()
        self._optimizing: dict[str, threading.Thread] = {}
        self._mutex = threading.RLock()

    # --- collections and aliases ---------------------------------------------------------------

    def _resolve(self, name: str) -> str:
        return self._files.resolve(name)

    def _shard(self, name: str) -> qe.EdgeShard:
        collection = self._resolve(name)
        shard = self._shards.get(collection)  # no lock on the hot path: a flush holds it
        if shard is not None and self._files.owned:
            return shard
        with self._mutex:
            if not self._files.owned:  # never open a shard without owning the store
                raise RuntimeError(f"the embedded vector store {self.root} was closed")
            shard = self._shards.get(collection)
            if shard is None:
                path = self._files.path(collection)
                if not path.is_dir():
                    raise KeyError(f"no vector collection {collection!r} in {self.root}")
                shard = self._shards[collection] = qe.EdgeShard.load(str(path))
            return shard

    def collections(self) -> set[str]:
        return self._files.collections()

    def create(self, collection: str, dim: int, keyword_fields: Sequence[str]) -> None:
        path = self._files.path(collection)
        with self._mutex:
            if collection not in self.collections():
                _build_shard(path, dim, keyword_fields, compact=self.compact)

    def drop(self, collection: str) -> None:
        path = self._files.path(collection)
        with self._mutex:
            self._wait_optimizer(collection)
            shard = self._shards.pop(collection, None)
            if shard is not None:
                shard.close()
            self._dirty.discard(collection)
            if path.is_dir():
                shutil.rmtree(path)
            aliases = self._files.aliases
            kept = {a: c for a, c in aliases.items() if c != collection}
            if kept != aliases:
                self._files.write_aliases(kept)

    def aliases(self) -> dict[str, str]:
        return dict(self._files.aliases)

    def set_aliases(self, aliases: Mapping[str, str | None]) -> None:
        with self._mutex:
            self._files.set_aliases(aliases)

    # --- points ----------------------------------------------------------------------------------

    def _write(self, name: str, op: qe.UpdateOperation, points: int = 0) -> None:
        collection = self._resolve(name)
        shard = self._shard(collection)
        classified(lambda: shard.update(op))
        with self._mutex:
            self._dirty.add(collection)
            self._written[collection] = self._written.get(collection, 0) + points

    def upsert(self, collection: str, points: Sequence[PointWrite]) -> None:
        if points:
            structs = [qe.Point(p.id, list(p.vector), dict(p.payload)) for p in points]
            self._write(collection, qe.UpdateOperation.upsert_points(structs), len(structs))

    def overwrite_payload(self, collection: str, point_id: str, payload: Mapping[str, Any]) -> None:
        self._write(collection, qe.UpdateOperation.overwrite_payload([point_id], dict(payload)))

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if ids:
            self._write(collection, qe.UpdateOperation.delete_points(list[Any](ids)))

    def delete_by_filter(self, collection: str, flt: Filter) -> None:
        edge = to_filter(flt)
        if edge is None:
            raise ValueError("delete_by_filter needs a filter")
        self._write(collection, qe.UpdateOperation.delete_points_by_filter(edge))

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vector: bool
    ) -> list[StoredPoint]:
        if not ids:
            return []
        shard = self._shard(collection)
        # 0.9.0 needs both arguments, whatever its stub says.
        found = shard.retrieve(list[Any](ids), with_payload=True, with_vector=with_vector)
        return [stored(r, with_vector) for r in found]

    def search(
        self, collection: str, vector: Sequence[float], flt: Filter, limit: int,
        *, exact: bool = False,
    ) -> list[Hit]:
        request = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(list(vector)), filter=to_filter(flt),
            with_payload=True, with_vector=False, params=_search_params(exact),
        )
        found = classified(lambda: self._shard(collection).query(request))
        return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in found]

    def scroll(
        self,
        collection: str,
        flt: Filter | None,
        fields: Sequence[str] | None,
        *,
        with_vector: bool = False,
    ) -> Iterator[list[StoredPoint]]:
        shard, offset = self._shard(collection), None
        selector: Any = qe.PayloadSelector.Include(list(fields)) if fields is not None else True
        while True:
            request = qe.ScrollRequest(offset=offset, limit=512, filter=to_filter(flt),
                                       with_payload=selector, with_vector=with_vector)
            records, offset = shard.scroll(request)
            yield [stored(r, with_vector) for r in records]
            if offset is None:
                return

    def count(self, collection: str, flt: Filter | None) -> int:
        request = qe.CountRequest(exact=True, filter=to_filter(flt))
        return int(self._shard(collection).count(request))

    # --- durability and optimization ------------------------------------------------------------

    def flush(self) -> None:
        """Flush every shard written since the last flush; start optimizers that are due."""
        with self._mutex:
            dirty, self._dirty = sorted(self._dirty), set()
            for collection in dirty:
                if collection in self._shards:
                    self._shards[collection].flush()
                if self._written.get(collection, 0) >= self.optimize_after:
                    self._start_optimizer(collection)

    def _start_optimizer(self, collection: str) -> None:
        running = self._optimizing.get(collection)
        if running is not None and running.is_alive():
            return
        self._written[collection] = 0
        shard = self._shards[collection]
        thread = threading.Thread(target=shard.optimize, name=f"optimize-{collection}",
                                  daemon=True)
        self._optimizing[collection] = thread
        thread.start()

    def settle(self, collection: str, timeout_s: float = 3600.0) -> None:
        """Flush and optimize ``collection`` now, in this thread, until Edge plans nothing
        more (its graphs and quantized vectors built): what a benchmark waits for before it
        measures. ``timeout_s`` is the server's argument; Edge's optimize cannot be bounded."""
        with self._mutex:
            self.flush()
            name = self._resolve(collection)
            self._wait_optimizer(name)
            shard = self._shard(name)
        shard.optimize()

    def optimizing(self) -> list[str]:
        return sorted(c for c, t in self._optimizing.items() if t.is_alive())

    def _wait_optimizer(self, collection: str) -> None:
        thread = self._optimizing.pop(collection, None)
        if thread is not None:
            thread.join()

    def close(self) -> None:
        """Flush, wait for running optimizers, close every shard and release the lock."""
        with self._mutex:
            if not self._files.owned:
                return
            self.flush()
            for collection in list(self._optimizing):
                self._wait_optimizer(collection)
            for shard in self._shards.values():
                shard.close()
            self._shards.clear()
            self._files.release()
