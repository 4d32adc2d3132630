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

import contextvars
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from indexer.adapters import factories
from indexer.adapters.dynamodb.store import DynamoStore
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.qdrant import targets as vt
from indexer.adapters.qdrant.index import LegacyStoreError, StoreBusyError, VectorIndex
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api.encoding import READ_TARGET_TTL_S, QueryEncoder
from search_api.engine_errors import BackendUnavailable, naming
from search_api.languages import MailboxLanguages
from search_api.limits import Gates
from search_api.mapping_check import MappingFacts
from search_api.repair import GuardedRepairs, NoRepairs, RepairSink

T = TypeVar("T")
@dataclass
class Backends:
    """``serves_vectors=False``: an API replica beside the embedded store's owner; it never
    opens the store (semantic, hybrid and similar answer 503), full text is served as usual."""

    settings: Settings
    serves_vectors: bool = True
    repairs: RepairSink = field(default_factory=NoRepairs)
    read_target_ttl_s: float = READ_TARGET_TTL_S  # on a Qdrant server (see QueryEncoder)

    def __post_init__(self) -> None:
        self._guarded = GuardedRepairs(self.repairs)
        self._legs = ThreadPoolExecutor(max_workers=16, thread_name_prefix="search-leg")
        # The query encoder, the admission gates and the mapping's facts: built once with
        # this process's adapters, each in its own module.
        self.encoder = QueryEncoder(self.settings, self.ask_vectors, self.read_target_ttl_s)
        self.gates = Gates.of(self.settings)
        self.mapping = MappingFacts(lambda: self.opensearch)
        self.languages = MailboxLanguages(lambda: self.opensearch,
                                          self.settings.search_timeout_ms)

    def concurrently(
        self, fn: Callable[..., T], /, *args: Any, **kwargs: Any
    ) -> Future[T]:
        """Run one leg of a search (an engine call) beside the request's own thread: a fused
        search then waits for its slowest leg, not for the sum of them."""
        # in the request's context: a leg builds its query for the same languages
        # (search_api.query.clauses.in_languages)
        return self._legs.submit(contextvars.copy_context().run, fn, *args, **kwargs)

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
        self.encoder.close()
        self._legs.shutdown(wait=False, cancel_futures=True)
        if getattr(self, "_opened_vectors", False):
            factories.vector_index(self.settings).close()

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
