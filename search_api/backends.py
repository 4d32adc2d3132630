"""The API's adapters, built once per process (FastAPI lifespan) from settings.

In embedded-Qdrant mode the API process is also the vectors consumer (see
``search_api.serve``), so the vector index here and the one the vectors task uses are the
same object: ``indexer.pipeline.deps`` caches one per settings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from indexer.adapters.dynamo import DynamoStore
from indexer.adapters.embedder import Embedder
from indexer.adapters.opensearch import OpenSearchIndex
from indexer.adapters.qdrant import StoreBusyError, VectorIndex
from indexer.core.errors import TransientError
from indexer.core.plan import MessageRef
from indexer.pipeline import deps
from indexer.settings import Settings


class BackendUnavailable(RuntimeError):
    """An engine did not answer: the API says 503 with Retry-After, naming the component."""

    def __init__(self, component: str, detail: str = "") -> None:
        super().__init__(f"{component} unavailable {detail}".strip())
        self.component = component


@dataclass
class Backends:
    """``serves_vectors=False``: an API replica beside the embedded store's owner; it never
    opens the store (semantic, hybrid and similar answer 503), full text is served as usual."""

    settings: Settings
    serves_vectors: bool = True

    @property
    def opensearch(self) -> OpenSearchIndex:
        try:
            return deps.fulltext_index(self.settings)  # cached once it could be built
        except TransientError as exc:
            raise BackendUnavailable("opensearch", str(exc)) from exc

    def require_vectors(self) -> None:
        """503 at once on a replica that never opens the store (before embedding a query)."""
        if not self.serves_vectors:
            raise BackendUnavailable("qdrant", "(not opened by this API replica)")

    @property
    def vectors(self) -> VectorIndex:
        self.require_vectors()
        try:
            index = deps.vector_index(self.settings)
        except (TransientError, StoreBusyError) as exc:
            raise BackendUnavailable("qdrant", str(exc)) from exc
        self._opened_vectors = True
        return index

    def close(self) -> None:
        """Release the embedded store's lock at shutdown (if this process opened it)."""
        if getattr(self, "_opened_vectors", False):
            deps.vector_index(self.settings).client.close()

    @cached_property
    def embedder(self) -> Embedder:
        return deps.embedder(self.settings)

    def query_embedder(self) -> Embedder:
        """The encoder of the collection behind the read alias: during a change of model,
        and after a rollback, queries are embedded by the model that embedded the mail."""
        from indexer.adapters import vector_targets as vt
        from indexer.adapters.embedder import cached_embedder, model_catalog

        index, settings = self.vectors, self.settings
        catalog = model_catalog(settings.embed_model, settings.embed_models)
        read = vt.members(index).get(index.alias) or index.collection
        try:
            slug, _tokens = vt.encoder_of(index, read, catalog, settings.embed_max_tokens)
        except ValueError as exc:
            raise BackendUnavailable("qdrant", str(exc)) from exc
        spec = catalog[slug].spec
        if spec == settings.embed_model:
            return self.embedder
        return cached_embedder(spec, settings.embed_max_tokens, settings.embed_threads,
                               settings.embed_batch_size, settings.embed_dtype)

    @cached_property
    def store(self) -> DynamoStore:
        return deps.store(self.settings)

    @cached_property
    def _send(self) -> Callable[[str, dict[str, Any]], Any]:
        from indexer.pipeline.runner import celery_send

        return celery_send(self.settings)

    def repair(self, refs: Iterable[MessageRef]) -> None:
        """Enqueue the normal pipeline for messages whose hot row is gone: the sync reads the
        table, finds them missing and deletes them from both indexes."""
        payload = {"messages": [r.to_json() for r in refs], "participants": []}
        if payload["messages"]:
            self._send("fulltext", payload)
            self._send("vectors", payload)
