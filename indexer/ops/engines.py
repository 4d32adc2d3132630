"""The adapters an operations command needs, opened for its duration and closed after.

The vector index is opened here rather than through ``factories.vector_index`` (cached for the
process's life): with the embedded store an operation must release its exclusive lock when it
ends, so a worker or ``sidecar serve`` started afterwards (or a test's next step) can own it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from indexer.adapters import factories
from indexer.adapters.dynamodb.store import DynamoStore
from indexer.adapters.embedding.embedder import model_catalog, model_info
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.qdrant import targets as vt
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.recipes import DEFAULT_RECIPE, Recipe
from indexer.settings import Settings


@dataclass(frozen=True)
class Engines:
    store: DynamoStore
    fulltext: OpenSearchIndex
    vectors: VectorIndex
    # The embedded text of the collection behind the read alias (see ``read_recipe``).
    vector_recipe: Recipe = DEFAULT_RECIPE


def read_recipe(settings: Settings, vectors: VectorIndex) -> Recipe:
    """The recipe of the collection searches read: what its points must have been made from
    (it may differ from ``SIDECAR_EMBED_RECIPE`` until ``sidecar reindex --vectors`` moves the
    alias)."""
    catalog = model_catalog(settings.embed_model, settings.embed_models)
    return vt.VectorTargets.of(vectors, catalog, settings.embed_max_tokens).read_encoder().recipe


@contextmanager
def open_engines(settings: Settings) -> Iterator[Engines]:
    """DynamoDB, OpenSearch and Qdrant for one operation; the vector store is closed after.

    With the embedded store this fails at once (naming the store) while a worker or
    ``sidecar serve`` owns it: stop the owner, or use ``SIDECAR_QDRANT_URL``.
    """
    store = build_store(settings)
    try:
        model = model_info(settings.embed_model)
        vectors = VectorIndex(store, settings.qdrant_collection, factories.vector_slug(settings),
                              model.dimension, settings.embed_recipe)
        vectors.ensure()
        yield Engines(factories.store(settings), factories.fulltext_index(settings), vectors)
    finally:
        store.close()
