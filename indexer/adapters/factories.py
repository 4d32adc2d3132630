"""Per-process adapters, built once from settings on first use (never at import time).

In embedded-Qdrant mode only the process consuming the vectors queue may open the store
(it takes an exclusive lock): other roles never touch :func:`vector_index`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Generic, TypeVar

from indexer.adapters.aws import clients as aws
from indexer.adapters.broker import redis_client
from indexer.adapters.dynamodb.dlq import dead_letters
from indexer.adapters.dynamodb.store import DynamoStore
from indexer.adapters.embedding.embedder import Embedder, build_embedder, model_info, with_precision
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.settings import Settings

__all__ = [
    "dead_letters",
    "embedder",
    "fulltext_index",
    "redis_client",
    "store",
    "vector_index",
]


T = TypeVar("T")


class _BuiltOnce(Generic[T]):
    """An ``lru_cache`` of an adapter factory, with a lock: concurrent first calls (the API's
    request threads, a bench's client threads) build one adapter, not one each — a second
    embedded Qdrant store open in one process fails on the owner's lock."""

    def __init__(self, build: Callable[[Settings], T]) -> None:
        self._cached = lru_cache(maxsize=4)(build)
        self._lock = threading.RLock()
        self.__doc__, self.__name__ = build.__doc__, build.__name__

    def __call__(self, settings: Settings) -> T:
        with self._lock:
            return self._cached(settings)

    def cache_clear(self) -> None:
        with self._lock:
            self._cached.cache_clear()


@_BuiltOnce
def store(settings: Settings) -> DynamoStore:
    return DynamoStore(
        aws.client(settings, "dynamodb"), settings.table, settings.resolved_state_table
    )


@_BuiltOnce
def fulltext_index(settings: Settings) -> OpenSearchIndex:
    index = OpenSearchIndex(build_opensearch(settings), settings.opensearch_index)
    index.ensure()
    return index


def vector_slug(settings: Settings) -> str:
    """The configured encoder's part of its collections' names, its precision included: an
    int8 encoder (the default) names its own (``<model>-int8``)."""
    return model_info(with_precision(settings.embed_model, settings.embed_precision)).slug


@_BuiltOnce
def vector_index(settings: Settings) -> VectorIndex:
    model = model_info(with_precision(settings.embed_model, settings.embed_precision))
    index = VectorIndex(
        build_store(settings),
        settings.qdrant_collection,
        vector_slug(settings),
        model.dimension,
        settings.embed_recipe,
    )
    index.ensure()
    return index


def embedder(settings: Settings) -> Embedder:
    return build_embedder(settings)
