"""The API's query encoder: which collection a query is searched in and by which model it is
embedded (the read target), the model loaded once, and concurrent queries batched into one
forward pass. Apart from the engine doors (:mod:`search_api.backends`): it owns a model and
caches, not a connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from indexer.adapters import factories
from indexer.adapters.embedding.embedder import (
    Embedder,
    build_embedder,
    model_catalog,
    with_precision,
)
from indexer.adapters.embedding.query_batch import QueryBatcher
from indexer.adapters.qdrant import targets as vt
from indexer.adapters.qdrant.index import VectorIndex
from indexer.metrics import QUERY_ENCODE_SECONDS
from indexer.settings import Settings
from search_api.engine_errors import BackendUnavailable

T = TypeVar("T")

# How long a Qdrant server's read alias is taken as resolved (an alias move is seen by
# searches within it; the collection a move leaves is kept for rollback, so they still
# answer, from a consistent pair). The embedded store's aliases are in memory: asked always.
READ_TARGET_TTL_S = 2.0


class TargetUnresolved(ValueError):
    """The read alias names a collection no model of this process makes."""


@dataclass(frozen=True)
class ReadTarget:
    """The collection behind the read alias and the model spec that embedded it, resolved
    together: a query embedded by one is searched in the other, even while the alias moves."""

    collection: str
    model: str
    cached: bool = False  # taken from the cache (else resolved by this request)


VectorsDoor = Callable[[Callable[[VectorIndex], ReadTarget]], ReadTarget]


class QueryEncoder:
    """Read targets, the model and the batchers of one API process. ``ask_vectors`` is the
    API's door to the vector store (errors named there)."""

    def __init__(self, settings: Settings, ask_vectors: VectorsDoor,
                 read_target_ttl_s: float = READ_TARGET_TTL_S) -> None:
        self.settings = settings
        self._ask_vectors = ask_vectors
        self.read_target_ttl_s = read_target_ttl_s
        self.model_loaded = threading.Event()
        self._model_lock = threading.Lock()
        self._batchers: dict[int, QueryBatcher] = {}  # by id of the (cached) embedder
        self._target: tuple[float, ReadTarget] | None = None

    @property
    def embedder(self) -> Embedder:
        """The query encoder; loaded once (``load_model`` at start, else on first use)."""
        with self._model_lock:  # one load, even with a request racing the start-up thread
            model = factories.embedder(self.settings)
        self.model_loaded.set()
        return model

    def load_model(self) -> None:
        """At API start (a background thread): ``/readyz`` answers 503 until it is done."""
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
            target = self._ask_vectors(resolve)
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
        started = time.perf_counter()
        try:
            return batcher.embed_query([text])[0]
        finally:
            QUERY_ENCODE_SECONDS.observe(time.perf_counter() - started)

    def close(self) -> None:
        for batcher in self._batchers.values():
            batcher.close()
