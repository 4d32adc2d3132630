"""The pipeline's per-process adapters: the factories of :mod:`indexer.adapters.factories`
(one cache per process, shared with the API when both run in one process)."""

from indexer.adapters.factories import (
    dead_letters,
    embedder,
    fulltext_index,
    redis_client,
    store,
    vector_index,
)

__all__ = ["dead_letters", "embedder", "fulltext_index", "redis_client", "store", "vector_index"]
