"""Qdrant adapter: one collection per embedding model behind an alias, plus an embedding cache.

The same code runs on the embedded store (``QdrantClient(path=...)``, one owner process) and on
a server (``SIDECAR_QDRANT_URL``): qdrant-client gives both one interface. The cache collection
maps a ``forai`` content hash to its vector, so identical text in many mailboxes is embedded once
and a re-delivered message is never re-embedded.
"""

from __future__ import annotations

import threading
import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from indexer.core.documents import point_id
from indexer.core.errors import ErrorKind, TransientError
from indexer.core.plan import MessageRef
from indexer.settings import Settings

_CACHE_NAMESPACE = uuid.UUID("0d3e2c9a-8c51-4a8f-b3f4-6d2f3c7e9b10")


class StoreBusyError(RuntimeError):
    """The embedded store admits one owner process, and another one has it."""


def build_client(settings: Settings) -> QdrantClient:
    """A server client when ``qdrant_url`` is set, else the embedded store (takes its lock)."""
    if settings.qdrant_url:
        return QdrantClient(url=settings.qdrant_url, timeout=30)
    settings.qdrant_path.mkdir(parents=True, exist_ok=True)
    try:
        return QdrantClient(path=str(settings.qdrant_path))
    except RuntimeError as exc:  # the store's exclusive lock is held
        raise StoreBusyError(
            f"the embedded Qdrant store {settings.qdrant_path} is owned by another process "
            "(a running `sidecar serve` or vectors worker?); stop it, or use SIDECAR_QDRANT_URL"
        ) from exc


def classify(exc: BaseException) -> ErrorKind | None:
    """The kind of a qdrant-client exception (``None``: not qdrant-client's): no answer,
    429 and 5xx are transient; another HTTP answer is unexpected."""
    if isinstance(exc, ResponseHandlingException):
        return ErrorKind.TRANSIENT
    if isinstance(exc, UnexpectedResponse):
        status = exc.status_code or 0
        return ErrorKind.TRANSIENT if status == 429 or status >= 500 else ErrorKind.UNEXPECTED
    return None


def _transient(exc: Exception) -> bool:
    kind = classify(exc)
    return kind is ErrorKind.TRANSIENT or (
        kind is None and isinstance(exc, ConnectionError | TimeoutError)
    )


def _match(key: str, value: str) -> models.Filter:
    condition = models.FieldCondition(key=key, match=models.MatchValue(value=value))
    return models.Filter(must=[condition])


def cache_id(content_hash: str) -> str:
    return str(uuid.uuid5(_CACHE_NAMESPACE, content_hash))


class VectorIndex:
    """Message points (alias → model collection) and the content-hash embedding cache."""

    def __init__(
        self,
        client: QdrantClient,
        prefix: str,
        model_slug: str,
        dim: int,
        *,
        layout: Mapping[str, int] | None = None,
    ) -> None:
        self.client = client
        # Shards and replicas of collections this index creates (``Settings.qdrant_layout``).
        self.layout = dict(layout or {})
        self.alias = f"{prefix}-vectors"
        self.collection = f"{prefix}-{model_slug}"
        self.cache = f"{prefix}-{model_slug}-cache"
        self.dim = dim
        # The embedded store is not thread-safe; a server client is, and the lock is cheap.
        self.lock = threading.RLock()

    def _do(self, fn: Any, /, **kwargs: Any) -> Any:
        try:
            with self.lock:
                return fn(**kwargs)
        except Exception as exc:
            if _transient(exc):
                raise TransientError(f"qdrant: {exc}") from exc
            raise

    def ensure(self) -> None:
        """On first use, create the collection, its cache and the alias (idempotent).

        When the alias already exists nothing is created: a vectors reindex moves it, and a
        process must not leave an empty collection behind after the old one was dropped.
        """
        aliases = self._do(self.client.get_aliases).aliases
        if any(a.alias_name == self.alias for a in aliases):
            return
        self.create_collections()
        op = models.CreateAliasOperation(
            create_alias=models.CreateAlias(collection_name=self.collection, alias_name=self.alias)
        )
        self._do(self.client.update_collection_aliases, change_aliases_operations=[op])

    def create_collections(self) -> None:
        """``collection`` and ``cache``, with the payload indexes (idempotent; no alias)."""
        params = models.VectorParams(size=self.dim, distance=models.Distance.COSINE)
        for name in (self.collection, self.cache):
            if not self._do(self.client.collection_exists, collection_name=name):
                self._do(
                    self.client.create_collection,
                    collection_name=name,
                    vectors_config=params,
                    **self.layout,
                )
        tenant = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        with warnings.catch_warnings():
            # The embedded store ignores payload indexes (and says so); a server uses them.
            warnings.simplefilter("ignore", UserWarning)
            for field, schema in (
                ("mailbox_id", tenant),
                ("thread_key", models.PayloadSchemaType.KEYWORD),
            ):
                self._do(
                    self.client.create_payload_index,
                    collection_name=self.collection,
                    field_name=field,
                    field_schema=schema,
                )

    def existing_payloads(self, refs: Iterable[MessageRef]) -> dict[MessageRef, dict[str, Any]]:
        """Payload of each message's current point (absent = no point)."""
        ids = {point_id(r): r for r in refs}
        if not ids:
            return {}
        points = self._do(
            self.client.retrieve,
            collection_name=self.alias,
            ids=list(ids),
            with_payload=True,
            with_vectors=False,
        )
        return {ids[str(p.id)]: dict(p.payload or {}) for p in points}

    def cached_vectors(self, hashes: Iterable[str]) -> dict[str, list[float]]:
        by_id = {cache_id(h): h for h in hashes}
        if not by_id:
            return {}
        points = self._do(
            self.client.retrieve,
            collection_name=self.cache,
            ids=list(by_id),
            with_payload=False,
            with_vectors=True,
        )
        return {by_id[str(p.id)]: list(p.vector) for p in points if isinstance(p.vector, list)}

    def remember(self, vectors: Mapping[str, Sequence[float]]) -> None:
        points = [
            models.PointStruct(id=cache_id(h), vector=list(v), payload={"content_hash": h})
            for h, v in vectors.items()
        ]
        if points:
            self._do(self.client.upsert, collection_name=self.cache, points=points, wait=True)

    def upsert(
        self, points: Sequence[tuple[MessageRef, Sequence[float], Mapping[str, Any]]]
    ) -> None:
        structs = [
            models.PointStruct(id=point_id(r), vector=list(v), payload=dict(p))
            for r, v, p in points
        ]
        if structs:
            self._do(self.client.upsert, collection_name=self.alias, points=structs, wait=True)

    def set_payloads(self, payloads: Mapping[MessageRef, Mapping[str, Any]]) -> None:
        """Refresh metadata of points whose text (hence vector) did not change."""
        for ref, payload in payloads.items():
            self._do(
                self.client.overwrite_payload,
                collection_name=self.alias,
                payload=dict(payload),
                points=[point_id(ref)],
                wait=True,
            )

    def delete(self, refs: Iterable[MessageRef]) -> None:
        ids: list[models.ExtendedPointId] = [point_id(r) for r in refs]
        if ids:
            self._do(
                self.client.delete,
                collection_name=self.alias,
                points_selector=models.PointIdsList(points=ids),
                wait=True,
            )

    def _scroll(
        self,
        flt: models.Filter | None,
        fields: Sequence[str] | None = None,
        collection: str | None = None,
    ) -> Iterator[list[dict[str, Any]]]:
        """Pages of point payloads (all fields, or these) under a filter (default: the alias)."""
        offset: Any = None
        selector: Any = list(fields) if fields is not None else True
        while True:
            points, offset = self._do(
                self.client.scroll,
                collection_name=collection or self.alias,
                scroll_filter=flt,
                limit=512,
                offset=offset,
                with_payload=selector,
                with_vectors=False,
            )
            yield [dict(p.payload or {}) for p in points]
            if offset is None:
                return

    def scroll_mailbox(self, mailbox_id: str) -> Iterator[list[dict[str, Any]]]:
        """Payloads of a mailbox's points, page by page."""
        return self._scroll(_match("mailbox_id", mailbox_id))

    def mailbox_ids(self) -> set[str]:
        """Every mailbox with at least one point."""
        return {
            str(p["mailbox_id"])
            for page in self._scroll(None, ["mailbox_id"])
            for p in page
            if "mailbox_id" in p
        }

    def delete_mailbox(self, mailbox_id: str) -> tuple[int, int]:
        """Delete a mailbox's points from every collection of this model (the live one and
        any a reindex builds or keeps), and the cached vectors of texts no remaining point of
        that collection uses (a vector is derived from the mail's text).

        Returns (points, cache entries) removed.
        """
        points = cached = 0
        names = {c.name for c in self._do(self.client.get_collections).collections}
        for name in sorted(n for n in names if self._in_family(n)):
            removed = self._delete_mailbox_in(name, mailbox_id, f"{name}-cache" in names)
            points, cached = points + removed[0], cached + removed[1]
        return points, cached

    def _in_family(self, name: str) -> bool:
        own = name == self.collection or name.startswith(f"{self.collection}-")
        return own and not name.endswith("-cache")

    def _delete_mailbox_in(self, collection: str, mailbox_id: str, cache: bool) -> tuple[int, int]:
        flt = _match("mailbox_id", mailbox_id)
        hashes: set[str] = set()
        points = 0
        for page in self._scroll(flt, ["content_hash"], collection):
            points += len(page)
            hashes |= {str(p["content_hash"]) for p in page if p.get("content_hash")}
        selector = models.FilterSelector(filter=flt)
        self._do(
            self.client.delete, collection_name=collection, points_selector=selector, wait=True
        )
        unused = sorted(hashes - self._hashes_in_use(collection, hashes)) if cache else []
        if unused:
            ids: list[models.ExtendedPointId] = [cache_id(h) for h in unused]
            self._do(
                self.client.delete,
                collection_name=f"{collection}-cache",
                points_selector=models.PointIdsList(points=ids),
                wait=True,
            )
        return points, len(unused)

    def _hashes_in_use(self, collection: str, hashes: Iterable[str]) -> set[str]:
        ordered, used = sorted(hashes), set[str]()
        for start in range(0, len(ordered), 256):
            flt = models.Filter(
                must=[
                    models.FieldCondition(
                        key="content_hash",
                        match=models.MatchAny(any=ordered[start : start + 256]),
                    )
                ]
            )
            for page in self._scroll(flt, ["content_hash"], collection):
                used |= {str(p["content_hash"]) for p in page}
        return used

    def query(self, vector: Sequence[float], flt: models.Filter, limit: int) -> list[Any]:
        """Nearest points under a filter, best first, with payloads."""
        result = self._do(
            self.client.query_points,
            collection_name=self.alias,
            query=list(vector),
            query_filter=flt,
            limit=limit,
            with_payload=True,
        )
        return list(result.points)

    def point(self, ref: MessageRef) -> Any | None:
        """One message's point with its stored vector, or None."""
        points = self._do(
            self.client.retrieve,
            collection_name=self.alias,
            ids=[point_id(ref)],
            with_payload=True,
            with_vectors=True,
        )
        return points[0] if points else None
