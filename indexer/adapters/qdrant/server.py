"""The vector store port on a Qdrant server, through qdrant-client (HTTP or gRPC).

This is the one place that classifies Qdrant server errors: a refused connection, a timeout,
429 or 5xx is transient (retry); 400/422 (the request can never succeed as sent) is poison
(dead letter); 401/403 is a configuration error with a one-line message naming the setting
(:class:`QdrantAuthError`, a :class:`~indexer.core.errors.ConfigurationError`: the tasks wait
for the fix, never dead-letter); anything else is unexpected and passes through.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

import grpc
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from indexer.core.errors import ConfigurationError, ErrorKind, PoisonError, TransientError
from indexer.core.vectors import (
    SEARCH_EF,
    Condition,
    Filter,
    Hit,
    Match,
    MatchAny,
    PointWrite,
    StoredPoint,
)

T = TypeVar("T")
Kind = Literal["transient", "poison", "auth", "unexpected"]
_TRANSIENT_GRPC = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "ABORTED"}
_POISON_GRPC = {"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"}
_AUTH_GRPC = {"UNAUTHENTICATED", "PERMISSION_DENIED"}


class QdrantAuthError(ConfigurationError):
    """The server refused our credentials: nothing will work until the settings change (and
    then everything will: the tasks retry it without a deadline)."""

    def __init__(self, reason: str) -> None:
        super().__init__("qdrant", reason)


def classify(exc: BaseException) -> Kind:
    """Qdrant's error classification (see the module docstring)."""
    if isinstance(exc, ResponseHandlingException | ConnectionError | TimeoutError):
        return "transient"
    if isinstance(exc, UnexpectedResponse):
        code = exc.status_code or 0
        if code in (401, 403):
            return "auth"
        if code == 429 or code >= 500:
            return "transient"
        return "poison" if code in (400, 422) else "unexpected"
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        name = exc.code().name
        for kind, names in (("transient", _TRANSIENT_GRPC), ("poison", _POISON_GRPC),
                            ("auth", _AUTH_GRPC)):
            if name in names:
                return kind  # type: ignore[return-value]
    return "unexpected"


def error_kind(exc: BaseException) -> ErrorKind | None:
    """:func:`classify` in the shared kinds (``None``: not a Qdrant client error); refused
    credentials are a configuration error: retried until an operator fixes the key."""
    if not isinstance(exc, ResponseHandlingException | UnexpectedResponse | grpc.RpcError):
        return None
    kind = classify(exc)
    shared = {"transient": ErrorKind.TRANSIENT, "poison": ErrorKind.POISON,
              "auth": ErrorKind.CONFIG}
    return shared.get(kind, ErrorKind.UNEXPECTED)


def _condition(c: Condition) -> models.FieldCondition:
    if isinstance(c, Match):
        return models.FieldCondition(key=c.key, match=models.MatchValue(value=c.value))
    if isinstance(c, MatchAny):
        return models.FieldCondition(key=c.key, match=models.MatchAny(any=list(c.values)))
    return models.FieldCondition(key=c.key, range=models.Range(gte=c.gte, lt=c.lt))


def to_filter(flt: Filter | None) -> models.Filter | None:
    if flt is None or not (flt.must or flt.must_not):
        return None
    must: list[Any] = [_condition(c) for c in flt.must]
    must_not: list[Any] = [_condition(c) for c in flt.must_not]
    return models.Filter(must=must or None, must_not=must_not or None)


def _stored(p: Any) -> StoredPoint:
    vector = [float(x) for x in p.vector] if isinstance(p.vector, list) else None
    return StoredPoint(str(p.id), dict(p.payload or {}), vector)


def _read_consistency(value: str | None) -> dict[str, Any]:
    """``consistency=`` of reads (``SIDECAR_QDRANT_READ_CONSISTENCY``); none when unset,
    so the server's default (one replica) applies."""
    if value is None:
        return {}
    if value.isdigit():
        return {"consistency": int(value)}
    return {"consistency": models.ReadConsistencyType(value)}


# The layout of the collections this store creates (docs/operations/capacity.md). Every search
# is filtered by one mailbox, so a global graph (m 16) is never walked whole: ``m 0`` builds
# none and ``payload_m 16`` builds one graph per value of the tenant field (``mailbox_id``,
# ``is_tenant``), so a whale's search walks its own graph; mailboxes under the full-scan
# threshold are searched exactly through the payload index. The vectors live as int8 in RAM
# (4x smaller than float32, scalar quantization at the 0.99 quantile) with the float32
# originals on disk, read back only to rescore the candidates of a search.
TENANT_HNSW = models.HnswConfigDiff(m=0, payload_m=16)
INT8 = models.ScalarQuantization(
    scalar=models.ScalarQuantizationConfig(type=models.ScalarType.INT8, quantile=0.99,
                                           always_ram=True))
# Rescore the quantized candidates with the originals: Qdrant's default for on-disk originals,
# stated so that a collection of either layout searches alike. Oversampling 2 fetches twice the
# limit in int8 before rescoring (recall against exact search measured by bench-tenants), at
# the graph beam :data:`~indexer.core.vectors.SEARCH_EF`.
RESCORE = models.SearchParams(
    hnsw_ef=SEARCH_EF,
    quantization=models.QuantizationSearchParams(rescore=True, oversampling=2.0))
# Exact: every matching point scored with the float32 originals (``ignore``: an int8
# collection's exact search would otherwise score in int8 and rescore only the best).
EXACT = models.SearchParams(exact=True,
                            quantization=models.QuantizationSearchParams(ignore=True))


class ServerStore:
    """:class:`indexer.core.vectors.VectorStore` on a server (thread-safe, like its client).

    ``compact``: collections it creates get per-tenant graphs and int8 vectors (the module's
    ``TENANT_HNSW``/``INT8``); False creates the float32 layout with Qdrant's global graph
    that collections had before (the benchmark builds both side by side). Collections that
    already exist keep the layout they were made with; searches work on both.
    """

    def __init__(self, client: QdrantClient, url: str, layout: Mapping[str, int] | None = None,
                 *, read_consistency: str | None = None, compact: bool = True):
        self.client, self.url, self.compact = client, url, compact
        # shards, replicas and write consistency of the collections it creates (a cluster;
        # the embedded Edge store has no distribution and ignores them)
        self.layout = dict(layout or {})
        self.consistency = _read_consistency(read_consistency)

    def _do(self, fn: Callable[..., T], /, **kwargs: Any) -> T:
        try:
            return fn(**kwargs)
        except Exception as exc:
            kind = classify(exc)
            if kind == "transient":
                raise TransientError(f"qdrant: {exc}") from exc
            if kind == "poison":
                raise PoisonError(f"qdrant rejected the request: {exc}") from exc
            if kind == "auth":
                raise QdrantAuthError(
                    f"the Qdrant server {self.url} refused the credentials (set "
                    "SIDECAR_QDRANT_API_KEY to the server's API key)"
                ) from None
            raise

    def collections(self) -> set[str]:
        return {c.name for c in self._do(self.client.get_collections).collections}

    def create(self, collection: str, dim: int, keyword_fields: Sequence[str]) -> None:
        """The collection and its payload indexes; an index already there is left as it was
        built (re-creating it with other parameters would rebuild it)."""
        if not self._do(self.client.collection_exists, collection_name=collection):
            params = models.VectorParams(size=dim, distance=models.Distance.COSINE,
                                         on_disk=True if self.compact else None)
            tuned: dict[str, Any] = (
                {"hnsw_config": TENANT_HNSW, "quantization_config": INT8} if self.compact else {})
            self._do(self.client.create_collection, collection_name=collection,
                     vectors_config=params, **tuned, **self.layout)
        info = self._do(self.client.get_collection, collection_name=collection)
        have = set(info.payload_schema or {})
        tenant = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        # the other keyword indexes (thread and message keys: a value per point) on disk in the
        # compact layout: in RAM they were 0.68 KB of every point's 1.4 KB (capacity.md)
        lookup: Any = (models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, on_disk=True)
                       if self.compact else models.PayloadSchemaType.KEYWORD)
        fields: list[tuple[str, Any]] = [("mailbox_id", tenant)]
        fields += [(f, lookup) for f in keyword_fields]
        for name, schema in fields:
            if name not in have:
                self._do(self.client.create_payload_index, collection_name=collection,
                         field_name=name, field_schema=schema, wait=True)

    def drop(self, collection: str) -> None:
        if self._do(self.client.collection_exists, collection_name=collection):
            self._do(self.client.delete_collection, collection_name=collection)

    def aliases(self) -> dict[str, str]:
        found = self._do(self.client.get_aliases).aliases
        return {a.alias_name: a.collection_name for a in found}

    def set_aliases(self, aliases: Mapping[str, str | None]) -> None:
        """One ``update_collection_aliases`` call: atomic on the server."""
        current = self.aliases()
        ops: list[models.AliasOperations] = [
            models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=name))
            for name in aliases
            if name in current
        ]
        for name, collection in aliases.items():
            if collection is not None:
                alias = models.CreateAlias(collection_name=collection, alias_name=name)
                ops.append(models.CreateAliasOperation(create_alias=alias))
        if ops:
            self._do(self.client.update_collection_aliases, change_aliases_operations=ops)

    def upsert(self, collection: str, points: Sequence[PointWrite]) -> None:
        structs = [
            models.PointStruct(id=p.id, vector=list(p.vector), payload=dict(p.payload))
            for p in points
        ]
        if structs:
            self._do(self.client.upsert, collection_name=collection, points=structs, wait=True)

    def overwrite_payload(self, collection: str, point_id: str, payload: Mapping[str, Any]) -> None:
        self._do(self.client.overwrite_payload, collection_name=collection,
                 payload=dict(payload), points=[point_id], wait=True)

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        if ids:
            selector = models.PointIdsList(points=list[models.ExtendedPointId](ids))
            self._do(self.client.delete, collection_name=collection,
                     points_selector=selector, wait=True)

    def delete_by_filter(self, collection: str, flt: Filter) -> None:
        selector = models.FilterSelector(filter=to_filter(flt) or models.Filter())
        self._do(self.client.delete, collection_name=collection,
                 points_selector=selector, wait=True)

    def retrieve(
        self, collection: str, ids: Sequence[str], *, with_vector: bool
    ) -> list[StoredPoint]:
        if not ids:
            return []
        points = self._do(self.client.retrieve, collection_name=collection, ids=list(ids),
                          with_payload=True, with_vectors=with_vector, **self.consistency)
        return [_stored(p) for p in points]

    def search(
        self, collection: str, vector: Sequence[float], flt: Filter, limit: int,
        *, exact: bool = False,
    ) -> list[Hit]:
        """Nearest points under ``flt``; ``exact`` scores every matching point with the float32
        originals (the yardstick of the benchmark's recall)."""
        result = self._do(self.client.query_points, collection_name=collection,
                          query=list(vector), query_filter=to_filter(flt), limit=limit,
                          with_payload=True, search_params=EXACT if exact else RESCORE,
                          **self.consistency)
        return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in result.points]

    def scroll(
        self,
        collection: str,
        flt: Filter | None,
        fields: Sequence[str] | None,
        *,
        with_vector: bool = False,
    ) -> Iterator[list[StoredPoint]]:
        offset: Any = None
        selector: Any = list(fields) if fields is not None else True
        while True:
            points, offset = self._do(self.client.scroll, collection_name=collection,
                                      scroll_filter=to_filter(flt), limit=512, offset=offset,
                                      with_payload=selector, with_vectors=with_vector,
                                      **self.consistency)
            yield [_stored(p) for p in points]
            if offset is None:
                return

    def count(self, collection: str, flt: Filter | None) -> int:
        found = self._do(self.client.count, collection_name=collection,
                         count_filter=to_filter(flt), exact=True)
        return int(found.count)

    def settle(self, collection: str, timeout_s: float = 3600.0) -> None:
        """Wait until the server's optimizers are done with ``collection`` (status green:
        graphs and quantized vectors built); what a benchmark waits for before it measures."""
        deadline = time.monotonic() + timeout_s
        while self._do(self.client.get_collection, collection_name=collection).status != \
                models.CollectionStatus.GREEN:
            if time.monotonic() > deadline:
                raise TransientError(f"qdrant: {collection} still optimizing after {timeout_s} s")
            time.sleep(0.5)

    def flush(self) -> None:
        """Every write above waited for the server (``wait=True``): nothing to do."""

    def close(self) -> None:
        self.client.close()
