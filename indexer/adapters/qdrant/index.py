"""The vector index: one collection per embedding model behind an alias, plus an embedding cache,
on whichever vector store the settings name (see :mod:`indexer.core.vectors`).

- embedded (default): Qdrant Edge in this process (:mod:`indexer.adapters.qdrant.edge`), one
  owner process, like the old local mode;
- server: qdrant-client against ``SIDECAR_QDRANT_URL`` (:mod:`indexer.adapters.qdrant.server`),
  with ``SIDECAR_QDRANT_API_KEY`` / ``SIDECAR_QDRANT_PREFER_GRPC``.

The cache collection maps an embedded text's content hash to its vector, so identical text in
many mailboxes is embedded once and a re-delivered message is never re-embedded.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from indexer.adapters.qdrant.edge import EdgeStore
from indexer.adapters.qdrant.edge_dir import LegacyStoreError, StoreBusyError
from indexer.core.documents import point_id
from indexer.core.pace import Pace, batch_size
from indexer.core.plan import MessageRef
from indexer.core.recipes import DEFAULT_RECIPE, Recipe, collection_name
from indexer.core.vectors import (
    Filter,
    Hit,
    MatchAny,
    PointWrite,
    StoredPoint,
    VectorStore,
    match,
)
from indexer.settings.qdrant import QdrantSettings

__all__ = ["LegacyStoreError", "StoreBusyError", "VectorIndex", "build_store", "cache_id"]

_CACHE_NAMESPACE = uuid.UUID("0d3e2c9a-8c51-4a8f-b3f4-6d2f3c7e9b10")
# Keyword indexes beside the tenant index on mailbox_id: filters and must_not use them.
# content_hash: a purge asks which of a mailbox's texts other points still use (their cached
# vectors stay); unindexed, every 256 hashes read every point of the collection: 130 s of a
# 1M-point purge (docs/results/runs/2026-12-05-tenants-1m-purge-paced.md)
KEYWORD_FIELDS = ("thread_key", "message_key", "content_hash")


def build_store(settings: QdrantSettings) -> VectorStore:
    """A server store when ``qdrant_url`` is set, else the embedded one (takes its lock)."""
    if settings.qdrant_url:
        from qdrant_client import QdrantClient

        from indexer.adapters.qdrant.server import ServerStore

        key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        with warnings.catch_warnings():
            if _loopback(settings.qdrant_url):  # a key over plain HTTP is fine on this host only
                warnings.filterwarnings("ignore", "Api key is used with an insecure connection")
            client = QdrantClient(
                url=settings.qdrant_url,
                api_key=key,
                prefer_grpc=settings.qdrant_prefer_grpc,
                grpc_port=settings.qdrant_grpc_port,
                timeout=30,
            )
        return ServerStore(client, settings.qdrant_url, settings.qdrant_layout,
                           read_consistency=settings.qdrant_read_consistency)
    return EdgeStore(settings.qdrant_path, optimize_after=settings.qdrant_optimize_after)


def _loopback(url: str) -> bool:
    return urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1")


def cache_id(content_hash: str) -> str:
    return str(uuid.uuid5(_CACHE_NAMESPACE, content_hash))


class VectorIndex:
    """Message points (alias → encoder collection) and the content-hash embedding cache.

    ``collection`` is the configured encoder's (model, truncation, ``recipe``): the one a fresh
    store starts with; the alias may name another one (a reindex moves it).
    """

    def __init__(
        self,
        store: VectorStore,
        prefix: str,
        model_slug: str,
        dim: int,
        recipe: Recipe = DEFAULT_RECIPE,
    ) -> None:
        self.store = store
        self.alias = f"{prefix}-vectors"
        self.model_slug, self.recipe = model_slug, recipe
        self.family = f"{prefix}-{model_slug}"  # every collection of this model starts so
        self.collection = collection_name(prefix, model_slug, None, recipe)
        self.cache = f"{self.collection}-cache"
        self.dim = dim

    def ensure(self) -> None:
        """On first use, create the collection, its cache and the alias (idempotent).

        When the alias already exists nothing is created: a vectors reindex moves it, and a
        process must not leave an empty collection behind after the old one was dropped.
        """
        if self.alias in self.store.aliases():
            return
        self.create_collections()
        self.store.set_aliases({self.alias: self.collection})

    def create_collections(self) -> None:
        """``collection`` and ``cache``, with the payload indexes (idempotent; no alias)."""
        self.store.create(self.collection, self.dim, KEYWORD_FIELDS)
        self.store.create(self.cache, self.dim, ())

    def existing_payloads(self, refs: Iterable[MessageRef]) -> dict[MessageRef, dict[str, Any]]:
        """Payload of each message's current point (absent = no point)."""
        ids = {point_id(r): r for r in refs}
        points = self.store.retrieve(self.alias, list(ids), with_vector=False)
        return {ids[p.id]: p.payload for p in points}

    def cached_vectors(self, hashes: Iterable[str]) -> dict[str, list[float]]:
        by_id = {cache_id(h): h for h in hashes}
        points = self.store.retrieve(self.cache, list(by_id), with_vector=True)
        return {by_id[p.id]: p.vector for p in points if p.vector is not None}

    def remember(self, vectors: Mapping[str, Sequence[float]]) -> None:
        points = [PointWrite(cache_id(h), v, {"content_hash": h}) for h, v in vectors.items()]
        self.store.upsert(self.cache, points)

    def upsert(
        self, points: Sequence[tuple[MessageRef, Sequence[float], Mapping[str, Any]]]
    ) -> None:
        self.store.upsert(self.alias, [PointWrite(point_id(r), v, p) for r, v, p in points])

    def set_payloads(self, payloads: Mapping[MessageRef, Mapping[str, Any]]) -> None:
        """Refresh metadata of points whose text (hence vector) did not change."""
        for ref, payload in payloads.items():
            self.store.overwrite_payload(self.alias, point_id(ref), payload)

    def delete(self, refs: Iterable[MessageRef]) -> None:
        self.store.delete(self.alias, [point_id(r) for r in refs])

    def flush(self) -> None:
        """The end of a batch that wrote: make its writes durable (embedded store)."""
        self.store.flush()

    def scroll_mailbox(self, mailbox_id: str) -> Iterator[list[dict[str, Any]]]:
        """Payloads of a mailbox's points, page by page."""
        pages = self.store.scroll(self.alias, match("mailbox_id", mailbox_id), None)
        return ([p.payload for p in page] for page in pages)

    def mailbox_ids(self) -> set[str]:
        """Every mailbox with at least one point."""
        return {
            str(p.payload["mailbox_id"])
            for page in self.store.scroll(self.alias, None, ["mailbox_id"])
            for p in page
            if "mailbox_id" in p.payload
        }

    def delete_mailbox(self, mailbox_id: str, rate: float = 0) -> tuple[int, int]:
        """Delete a mailbox's points from every collection of this model (the live one and
        any a reindex builds or keeps), and the cached vectors of texts no remaining point of
        that collection uses (a vector is derived from the mail's text). ``rate`` paces the
        deletes (points per second, :mod:`indexer.core.pace`; 0 = unpaced).

        Returns (points, cache entries) removed.
        """
        points = cached = 0
        names = self.store.collections()
        for name in sorted(n for n in names if self._in_family(n)):
            removed = self._delete_mailbox_in(name, mailbox_id, f"{name}-cache" in names, rate)
            points, cached = points + removed[0], cached + removed[1]
        self.store.flush()
        return points, cached

    def _in_family(self, name: str) -> bool:
        own = name == self.family or name.startswith(f"{self.family}-")
        return own and not name.endswith("-cache")

    def _delete_mailbox_in(self, collection: str, mailbox_id: str, cache: bool,
                           rate: float) -> tuple[int, int]:
        """The mailbox's points by id in paced batches, then by filter: the filter finds what
        was written while the batches ran (none, usually), and is cheap when nothing is left."""
        flt = match("mailbox_id", mailbox_id)
        hashes: set[str] = set()
        ids: list[str] = []
        for page in self.store.scroll(collection, flt, ["content_hash"]):
            ids += [p.id for p in page]
            hashes |= {str(h) for p in page if (h := p.payload.get("content_hash"))}
        pace = Pace(rate)
        pace.start()
        self._delete_paced(collection, ids, pace)
        self.store.delete_by_filter(collection, flt)
        unused = sorted(hashes - self._hashes_in_use(collection, hashes)) if cache else []
        self._delete_paced(f"{collection}-cache", [cache_id(h) for h in unused], pace)
        return len(ids), len(unused)

    def _delete_paced(self, collection: str, ids: Sequence[str], pace: Pace) -> None:
        """``ids`` deleted in batches of a tenth of the pace's rate, each followed by its wait."""
        size = batch_size(pace.rate)
        for start in range(0, len(ids), size):
            chunk = ids[start : start + size]
            self.store.delete(collection, chunk)
            pace.done(len(chunk))

    def _hashes_in_use(self, collection: str, hashes: Iterable[str]) -> set[str]:
        ordered, used = sorted(hashes), set[str]()
        for start in range(0, len(ordered), 256):
            flt = Filter(must=(MatchAny("content_hash", tuple(ordered[start : start + 256])),))
            for page in self.store.scroll(collection, flt, ["content_hash"]):
                used |= {str(p.payload["content_hash"]) for p in page}
        return used

    def query(self, vector: Sequence[float], flt: Filter, limit: int) -> list[Hit]:
        """Nearest points under a filter, best first, with payloads."""
        return self.store.search(self.alias, vector, flt, limit)

    def point(self, ref: MessageRef) -> StoredPoint | None:
        """One message's point with its stored vector, or None."""
        points = self.store.retrieve(self.alias, [point_id(ref)], with_vector=True)
        return points[0] if points else None

    def close(self) -> None:
        self.store.close()
