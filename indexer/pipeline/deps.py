"""Per-process adapters, built once from settings on first use (never at import time).

In embedded-Qdrant mode only the process consuming the vectors queue may open the store
(it takes an exclusive lock): other roles never touch :func:`vector_index`.
"""

from __future__ import annotations

from functools import lru_cache

import redis

from indexer.adapters import aws
from indexer.adapters.dlq import DeadLetterStore
from indexer.adapters.dynamo import DynamoStore
from indexer.adapters.embedder import Embedder, model_info
from indexer.adapters.opensearch import OpenSearchIndex
from indexer.adapters.opensearch import build_client as build_opensearch
from indexer.adapters.qdrant import VectorIndex
from indexer.adapters.qdrant import build_client as build_qdrant
from indexer.settings import Settings


@lru_cache(maxsize=4)
def redis_client(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.redis_url, socket_timeout=10, socket_connect_timeout=5)


@lru_cache(maxsize=4)
def dead_letters(settings: Settings) -> DeadLetterStore:
    return DeadLetterStore(redis_client(settings), settings.queue_prefix)


@lru_cache(maxsize=4)
def store(settings: Settings) -> DynamoStore:
    return DynamoStore(
        aws.client(settings, "dynamodb"), settings.table, settings.resolved_state_table
    )


@lru_cache(maxsize=4)
def fulltext_index(settings: Settings) -> OpenSearchIndex:
    index = OpenSearchIndex(build_opensearch(settings), settings.opensearch_index)
    index.ensure()
    return index


@lru_cache(maxsize=4)
def vector_index(settings: Settings) -> VectorIndex:
    model = model_info(settings.embed_model)
    index = VectorIndex(
        build_qdrant(settings),
        settings.qdrant_collection,
        model.slug,
        model.dimension,
        layout=settings.qdrant_layout,
    )
    index.ensure()
    return index


@lru_cache(maxsize=2)
def embedder(settings: Settings) -> Embedder:
    return Embedder(
        max_tokens=settings.embed_max_tokens,
        threads=settings.embed_threads,
        batch_size=settings.embed_batch_size,
        dtype=settings.embed_dtype,
        model=settings.embed_model,
    )
