"""The API's adapters, built once per process (FastAPI lifespan) from settings.

Adapters come from :mod:`indexer.adapters.factories`, one cache per process: in
embedded-Qdrant mode the API process is also the vectors consumer (see ``search_api.serve``),
so the vector index here and the one the vectors task uses are the same object. Read-repair
goes through the :class:`~search_api.repair.RepairSink` port the serve command wires.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from indexer.adapters import factories
from indexer.adapters.dynamo import DynamoStore
from indexer.adapters.embedder import Embedder
from indexer.adapters.opensearch import OpenSearchIndex
from indexer.adapters.qdrant import LegacyStoreError, StoreBusyError, VectorIndex
from indexer.adapters.query_batch import QueryBatcher
from indexer.core.errors import TransientError
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api.limits import ExpensiveGate
from search_api.repair import GuardedRepairs, NoRepairs, RepairSink

T = TypeVar("T")


class BackendUnavailable(TransientError):
    """A core failure with the engine it came from: the adapters' :class:`TransientError`
    does not say which engine, so the one place that calls an engine for the API raises this
    instead (``component`` is what the 503 names). A TransientError like any other, so the
    app's one handler for that family (``app.py``) answers it; nothing else needs to know."""

    def __init__(self, component: str, detail: str = "") -> None:
        super().__init__(f"{component} unavailable {detail}".strip())
        self.component = component


@dataclass
class Backends:
    """``serves_vectors=False``: an API replica beside the embedded store's owner; it never
    opens the store (semantic, hybrid and similar answer 503), full text is served as usual."""

    settings: Settings
    serves_vectors: bool = True
    repairs: RepairSink = field(default_factory=NoRepairs)
    model_loaded: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._guarded = GuardedRepairs(self.repairs)
        self._model_lock = threading.Lock()
        self._batchers: dict[int, QueryBatcher] = {}  # by id of the (cached) embedder
        self._legs = ThreadPoolExecutor(max_workers=16, thread_name_prefix="search-leg")

    def concurrently(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> Future[T]:
        """Run one leg of a search (an engine call) beside the request's own thread: a fused
        search then waits for its slowest leg, not for the sum of them."""
        return self._legs.submit(fn, *args, **kwargs)

    @property
    def opensearch(self) -> OpenSearchIndex:
        """Cached once it could be built; a failure to build it (the cluster down) surfaces
        where searches call it, ``service.os_search``, which names the engine."""
        return factories.fulltext_index(self.settings)

    def require_vectors(self) -> None:
        """503 at once on a replica that never opens the store (before embedding a query)."""
        if not self.serves_vectors:
            raise BackendUnavailable("qdrant", "(not opened by this API replica)")

    @property
    def vectors(self) -> VectorIndex:
        self.require_vectors()
        try:
            index = factories.vector_index(self.settings)
        except (TransientError, StoreBusyError, LegacyStoreError) as exc:
            raise BackendUnavailable("qdrant", str(exc)) from exc
        self._opened_vectors = True
        return index

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

    def query_embedder(self) -> Embedder:
        """The encoder of the collection behind the read alias: during a change of model,
        and after a rollback, queries are embedded by the model that embedded the mail."""
        from indexer.adapters import vector_targets as vt
        from indexer.adapters.embedder import build_embedder, model_catalog

        index, settings = self.vectors, self.settings
        catalog = model_catalog(settings.embed_model, settings.embed_models)
        try:  # reads the alias: the store may fail, or name a collection no model makes
            encoder = vt.read_encoder(index, catalog, settings.embed_max_tokens)
        except (ValueError, TransientError) as exc:
            raise BackendUnavailable("qdrant", str(exc)) from exc
        spec = catalog[encoder.slug].spec
        if spec == settings.embed_model:
            return self.embedder
        return build_embedder(settings, model=spec)

    def embed_query(self, text: str) -> list[float]:
        """The query's vector by the read collection's model, encoded in one pass with the
        other requests' queries that wait (:mod:`indexer.adapters.query_batch`)."""
        embedder = self.query_embedder()
        with self._model_lock:
            batcher = self._batchers.get(id(embedder))
            if batcher is None:
                batcher = self._batchers[id(embedder)] = QueryBatcher(embedder.embed_query)
        return batcher.embed_query([text])[0]

    @cached_property
    def expensive_gate(self) -> ExpensiveGate:
        """This process's count of each caller's expensive searches."""
        return ExpensiveGate(
            self.settings.api_expensive_per_token, self.settings.api_expensive_per_second
        )

    @cached_property
    def store(self) -> DynamoStore:
        return factories.store(self.settings)

    def rows(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """Hot items by (pk, sk), absent ones left out: the API's one read of the table."""
        try:
            return self.store.get_items(keys)
        except TransientError as exc:
            raise BackendUnavailable("dynamodb", str(exc)) from exc

    def repair(self, refs: Iterable[MessageRef]) -> None:
        """Ask for stale hits to be repaired: de-duplicated, and never failing the search."""
        by_mailbox: dict[str, list[str]] = {}
        for ref in refs:
            by_mailbox.setdefault(ref.mailbox_id, []).append(ref.message_key)
        for mailbox, keys in by_mailbox.items():
            self._guarded.request_repair(mailbox, keys)
