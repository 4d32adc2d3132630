"""The read alias's resolution is cached on a Qdrant server, safely: a query and its
collection always come from one resolution, a move of the alias is seen within the TTL, and a
collection that vanished under the cache is forgotten at the first query that misses it.

Against a real Qdrant server (the session's) and the embedded store; no model is loaded."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters.embedding.embedder import with_precision
from indexer.adapters.qdrant import targets as vt
from indexer.settings import Settings
from search_api.backends import READ_TARGET_TTL_S, Backends
from search_api.query import VectorFilter
from search_api.vector_search import search

pytestmark = [pytest.mark.stack]


@pytest.fixture
def server_backends(qdrant_server: Any) -> Iterator[Backends]:
    settings = Settings(qdrant_url=qdrant_server.url, qdrant_api_key=qdrant_server.api_key,
                        qdrant_collection=f"rt-{uuid.uuid4().hex[:8]}")
    backends = Backends(settings, read_target_ttl_s=60.0)  # no expiry mid-test on busy cores
    yield backends
    backends.close()


@pytest.mark.qdrant_server
def test_a_server_alias_is_resolved_once_per_ttl_and_forgotten_on_a_miss(
    server_backends: Backends,
) -> None:
    b = server_backends
    index = b.vectors
    first = b.encoder.read_target()
    assert not first.cached and first.collection == index.collection
    # the configured model at the configured precision (``#int8`` by default)
    assert first.model == with_precision(b.settings.embed_model, b.settings.embed_precision)
    again = b.encoder.read_target()
    assert again.cached and again.collection == first.collection  # no aliases round trip

    targets = vt.VectorTargets(index)
    moved = targets.collection_for(64)  # the same model, 64 tokens: a reindex's target
    targets.create(moved)
    targets.set_aliases(moved, None)
    assert b.encoder.read_target().collection == first.collection  # within the TTL: the old pair
    assert b.encoder.read_target(fresh=True).collection == moved  # asked now: the new one

    index.store.drop(moved)  # the cached collection goes: the next query misses it
    cached = b.encoder.read_target()
    assert cached.cached and cached.collection == moved
    flt = VectorFilter("nobody@example.com")
    with pytest.raises(Exception):  # noqa: B017 - the server's 404, whatever its kind
        search(b, [0.1] * index.dim, flt, 5, cached)
    b.encoder.forget_read_target(cached)
    targets.set_aliases(first.collection, None)
    back = b.encoder.read_target()
    assert not back.cached and back.collection == first.collection
    assert search(b, [0.1] * index.dim, flt, 5, back) == []
    assert READ_TARGET_TTL_S <= 5.0  # as shipped, a move is seen within seconds


def test_the_embedded_store_is_asked_every_time(tmp_path: Path) -> None:
    settings = Settings(qdrant_path=tmp_path / "q", qdrant_collection="rt-edge")
    b = Backends(settings)
    try:
        index = b.vectors
        assert not b.encoder.read_target().cached and not b.encoder.read_target().cached  # in memory: free
        targets = vt.VectorTargets(index)
        moved = targets.collection_for(64)
        targets.create(moved)
        targets.set_aliases(moved, None)
        assert b.encoder.read_target().collection == moved  # seen at once
    finally:
        b.close()
