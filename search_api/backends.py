"""The API's adapters, built once per process (FastAPI lifespan) from settings, and its doors
to the engines.

Adapters come from :mod:`indexer.adapters.factories`, one cache per process: in
embedded-Qdrant mode the API process is also the vectors consumer (see ``search_api.serve``),
so the vector index here and the one the vectors task uses are the same object. Read-repair
goes through the :class:`~search_api.repair.RepairSink` port the serve command wires.

Every engine call of the API passes one door here (:meth:`Backends.text_search`,
:meth:`Backends.rows`, :meth:`Backends.ask_vectors`): a failure of the core's family leaves
it as the same exception, with the engine named (:func:`naming`), for the app's one handler.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from indexer.adapters import factories
from indexer.adapters.dynamodb.store import DynamoStore
from indexer.adapters.embedding.embedder import (
    Embedder,
    build_embedder,
    model_catalog,
    with_precision,
)
from indexer.adapters.embedding.query_batch import QueryBatcher
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.qdrant import targets as vt
from indexer.adapters.qdrant.index import LegacyStoreError, StoreBusyError, VectorIndex
from indexer.core.errors import TransientError
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api import mapping_check
from search_api.limits import ExpensiveGate, RequestRate
from search_api.query.clauses import PREFIX_FIELDS_VERSION
from search_api.query.more_like_this import LIKED_BODY_ANALYZER
from search_api.repair import GuardedRepairs, NoRepairs, RepairSink

T = TypeVar("T")
# How long a Qdrant server's read alias is taken as resolved (an alias move is seen by
# searches within it; the collection a move leaves is kept for rollback, so they still
# answer, from a consistent pair). The embedded store's aliases are in memory: asked always.
READ_TARGET_TTL_S = 2.0
# How long the read index is taken to have (or lack) the liked-body analyzer: a reindex that
# adds it is used within this; a rollback to an index without it is read whole after it.
LIKED_ANALYZER_TTL_S = 10.0


class BackendUnavailable(TransientError):
    """An engine this replica cannot use at all (the store never opened here, held by
    another process, or of an older layout): a failure that starts here, with its engine."""

    def __init__(self, component: str, detail: str = "") -> None:
        super().__init__(f"{component} unavailable {detail}".strip())
        self.component = component


@contextmanager
def naming(component: str) -> Iterator[None]:
    """Name the engine on a failure of the core's family as it passes (the adapters' errors
    do not say which engine): the same exception goes on, never wrapped."""
    try:
        yield
    except TransientError as exc:
        if exc.component is None:
            exc.component = component
        raise


@dataclass(frozen=True)
class ReadTarget:
    """The collection behind the read alias and the model spec that embedded it, resolved
    together: a query embedded by one is searched in the other, even while the alias moves."""

    collection: str
    model: str
    cached: bool = False  # taken from the cache (else resolved by this request)


@dataclass
class Backends:
    """``serves_vectors=False``: an API replica beside the embedded store's owner; it never
    opens the store (semantic, hybrid and similar answer 503), full text is served as usual."""

    settings: Settings
    serves_vectors: bool = True
    repairs: RepairSink = field(default_factory=NoRepairs)
    model_loaded: threading.Event = field(default_factory=threading.Event)
    read_target_ttl_s: float = READ_TARGET_TTL_S  # on a Qdrant server (see read_target)

    def __post_init__(self) -> None:
        self._guarded = GuardedRepairs(self.repairs)
        self._model_lock = threading.Lock()
        self._batchers: dict[int, QueryBatcher] = {}  # by id of the (cached) embedder
        self._legs = ThreadPoolExecutor(max_workers=16, thread_name_prefix="search-leg")
        self._target: tuple[float, ReadTarget] | None = None
        self._liked: tuple[float, str | None] | None = None
        self._prefixed: tuple[float, bool] | None = None

    def concurrently(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> Future[T]:
        """Run one leg of a search (an engine call) beside the request's own thread: a fused
        search then waits for its slowest leg, not for the sum of them."""
        return self._legs.submit(fn, *args, **kwargs)

    @property
    def opensearch(self) -> OpenSearchIndex:
        """Cached once it could be built; a failure to build it (the cluster down) surfaces
        where searches call it, :meth:`text_search`, which names the engine."""
        return factories.fulltext_index(self.settings)

    def text_search(self, mailbox: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """One search within the time budget the engine enforces (``SIDECAR_SEARCH_TIMEOUT_MS``;
        over it, or refused, the adapter's PoisonError: the caller's 400); the API's one door
        to OpenSearch."""
        with naming("opensearch"):
            return self.opensearch.search(mailbox, body, budget_ms=self.settings.search_timeout_ms)

    def liked_body_analyzer(self) -> str | None:
        """The analyzer "similar" reads a liked body with, where every index behind the read
        alias defines it (mapping version 5 on), else None (the whole body, as before); asked
        of the cluster once per :data:`LIKED_ANALYZER_TTL_S`."""
        now = time.monotonic()
        known = self._liked
        if known is not None and now - known[0] < LIKED_ANALYZER_TTL_S:
            return known[1]
        with naming("opensearch"):
            found = self.opensearch.has_analyzer(LIKED_BODY_ANALYZER)
        self._liked = (now, LIKED_BODY_ANALYZER if found else None)
        return self._liked[1]

    def prefix_fields_indexed(self) -> bool:
        """Whether every index behind the read alias has mapping v6's prefix fields (named
        ``<alias>-v<N>``, N >= 6; no index yet: nothing to expand), asked once per
        :data:`LIKED_ANALYZER_TTL_S`. An index of an unknown name is taken as lacking them."""
        now = time.monotonic()
        known = self._prefixed
        if known is not None and now - known[0] < LIKED_ANALYZER_TTL_S:
            return known[1]
        with naming("opensearch"):
            state = mapping_check.check(self.opensearch)
        found = all(v is not None and v >= PREFIX_FIELDS_VERSION for v in state.live.values())
        self._prefixed = (now, found)
        return found

    def require_vectors(self) -> None:
        """503 at once on a replica that never opens the store (before embedding a query)."""
        if not self.serves_vectors:
            raise BackendUnavailable("qdrant", "(not opened by this API replica)")

    @property
    def vectors(self) -> VectorIndex:
        self.require_vectors()
        try:
            with naming("qdrant"):
                index = factories.vector_index(self.settings)
        except (StoreBusyError, LegacyStoreError) as exc:  # not the core's: said as one
            raise BackendUnavailable("qdrant", str(exc)) from exc
        self._opened_vectors = True
        return index

    def ask_vectors(self, call: Callable[[VectorIndex], T], collection: str | None = None) -> T:
        """The API's one door to the vector store: ``call`` on the read alias, or on
        ``collection`` by name (a :class:`ReadTarget`'s)."""
        index = self.vectors
        with naming("qdrant"):
            return call(vt.VectorTargets(index).bound(collection) if collection else index)

    def close(self) -> None:
        """Release the embedded store's lock at shutdown (if this process opened it)."""
        for batcher in self._batchers.values():
            batcher.close()
        self._legs.shutdown(wait=False, cancel_futures=True)
        if getattr(self, "_opened_vectors", False):
            factories.vector_index(self.settings).close()

    @property
    def embedder(self) -> Embedder:
        """The query encoder; loaded once (``load_model`` at start, else on first use)."""
        with self._model_lock:  # one load, even with a request racing the start-up thread
            model = factories.embedder(self.settings)
        self.model_loaded.set()
        return model

    def load_model(self) -> None:
        """At API start (a background thread): ``/readyz`` answers 503 until it is done."""
        if self.serves_vectors:
            self.embedder  # noqa: B018 - loads it

    def read_target(self, *, fresh: bool = False) -> ReadTarget:
        """The read alias's collection and its model: on a Qdrant server resolved once per
        :attr:`read_target_ttl_s` (not one ``aliases`` round trip per query), or now with
        ``fresh``; a query that fails on a cached target forgets it
        (:meth:`forget_read_target`)."""
        now = time.monotonic()
        known = self._target
        ttl = self.read_target_ttl_s if self.settings.qdrant_url else 0.0
        if not fresh and known is not None and now - known[0] < ttl:
            return ReadTarget(known[1].collection, known[1].model, cached=True)
        settings = self.settings
        catalog = model_catalog(settings.embed_model, settings.embed_models)

        def resolve(index: VectorIndex) -> ReadTarget:
            targets = vt.VectorTargets.of(index, catalog, settings.embed_max_tokens)
            collection = targets.read_collection()
            encoder = targets.encoder_of(collection)
            return ReadTarget(collection, catalog[encoder.slug].spec)

        try:  # the store may fail, or name a collection no model of this process makes
            target = self.ask_vectors(resolve)
        except ValueError as exc:
            raise BackendUnavailable("qdrant", str(exc)) from exc
        self._target = (now, target)
        return target

    def forget_read_target(self, target: ReadTarget) -> None:
        """Drop the cached target if it is still ``target`` (a miss on it)."""
        known = self._target
        if known is not None and known[1].collection == target.collection:
            self._target = None

    def query_embedder(self, target: ReadTarget) -> Embedder:
        """The encoder of the target collection: during a change of model, and after a
        rollback, queries are embedded by the model that embedded the mail (and at its
        precision: ``target.model`` ends in ``#int8`` for an int8 collection)."""
        if target.model == with_precision(self.settings.embed_model, self.settings.embed_precision):
            return self.embedder
        return build_embedder(self.settings, model=target.model)

    def embed_query(self, text: str, target: ReadTarget) -> list[float]:
        """The query's vector by the target collection's model, encoded in one pass with the
        other requests' queries that wait (:mod:`indexer.adapters.embedding.query_batch`)."""
        embedder = self.query_embedder(target)
        with self._model_lock:
            batcher = self._batchers.get(id(embedder))
            if batcher is None:
                batcher = self._batchers[id(embedder)] = QueryBatcher(embedder.embed_query)
        return batcher.embed_query([text])[0]

    @cached_property
    def expensive_gate(self) -> ExpensiveGate:
        """This process's count of expensive searches, by caller and in all."""
        return ExpensiveGate(
            self.settings.api_expensive_per_token, self.settings.api_expensive_per_second,
            self.settings.api_expensive_in_flight,
        )

    @cached_property
    def request_rate(self) -> RequestRate:
        """This process's count of every caller's requests."""
        return RequestRate(self.settings.api_requests_per_second)

    @cached_property
    def store(self) -> DynamoStore:
        return factories.store(self.settings)

    def rows(
        self, keys: Sequence[tuple[str, str]], *, consistent: bool = True
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Items by (pk, sk), absent ones left out: the API's one door to the table."""
        with naming("dynamodb"):
            return self.store.get_items(keys, consistent=consistent)

    def repair(self, refs: Iterable[MessageRef]) -> None:
        """Ask for stale hits to be repaired: de-duplicated, and never failing the search."""
        by_mailbox: dict[str, list[str]] = {}
        for ref in refs:
            by_mailbox.setdefault(ref.mailbox_id, []).append(ref.message_key)
        for mailbox, keys in by_mailbox.items():
            self._guarded.request_repair(mailbox, keys)
