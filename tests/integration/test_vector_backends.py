"""What each vector backend does that the other does not: the embedded Edge store's one-owner
lock, old local-mode stores, durability across a reopen and background optimization; the
server's API key (SIDECAR_QDRANT_API_KEY), gRPC and cluster layout."""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from pathlib import Path

import pytest

from indexer.adapters.qdrant.edge import EdgeStore
from indexer.adapters.qdrant.edge_dir import LegacyStoreError, StoreBusyError
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.adapters.qdrant.server import QdrantAuthError
from indexer.core.vectors import PointWrite, match
from indexer.settings import Settings, to_env
from tests.integration.test_vector_store_congruence import DIM, points, unit


def test_a_second_owner_is_refused_before_touching_the_store(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path / "q")
    index = VectorIndex(first, "mail", "m", DIM)
    index.ensure()
    first.upsert(index.alias, points(20))
    first.flush()
    with pytest.raises(StoreBusyError, match="owned by another process") as caught:
        EdgeStore(tmp_path / "q")
    assert "\n" not in str(caught.value) and "SIDECAR_QDRANT_URL" in str(caught.value)
    first.upsert(index.alias, points(30))  # the owner goes on, unharmed
    first.flush()
    assert first.count(index.alias, None) == 30
    first.close()
    again = EdgeStore(tmp_path / "q")  # released on close
    assert again.count(index.alias, None) == 30
    again.close()


def test_an_old_local_mode_store_gets_one_line(tmp_path: Path) -> None:
    from qdrant_client import QdrantClient, models

    old = QdrantClient(path=str(tmp_path / "q"))
    old.create_collection("mail-x", vectors_config=models.VectorParams(
        size=DIM, distance=models.Distance.COSINE))
    old.close()
    with pytest.raises(LegacyStoreError) as caught:
        EdgeStore(tmp_path / "q")
    message = str(caught.value)
    assert "\n" not in message and "old embedded store" in message
    assert "Moving an old embedded vector store" in message


def test_points_and_aliases_survive_a_reopen(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "q")
    index = VectorIndex(store, "mail", "m", DIM)
    index.ensure()
    pts = points(50)
    store.upsert(index.alias, pts)
    store.delete(index.alias, [pts[0].id])
    store.flush()
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.count(index.alias, None)  # never opens a shard without the lock
    reopened = EdgeStore(tmp_path / "q")
    assert reopened.aliases() == {index.alias: index.collection}
    assert reopened.count(index.alias, None) == 49
    assert (tmp_path / "q" / "aliases.json").is_file()
    assert not list((tmp_path / "q").glob(".*.tmp"))  # the alias file was replaced whole
    reopened.close()


def test_optimize_runs_in_the_background_while_writes_and_searches_go_on(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "q", optimize_after=2_000)
    store.create("c", DIM, ("message_key",))
    rng = random.Random(1)
    written = 0
    for _batch in range(12):
        pts = [PointWrite(str(uuid.uuid4()), unit(rng), {"mailbox_id": f"b{i % 3}"})
               for i in range(500)]
        store.upsert("c", pts)
        store.flush()  # starts the optimizer once 2,000 points were written
        written += len(pts)
        began = time.monotonic()
        assert len(store.search("c", unit(rng), match("mailbox_id", "b1"), 10)) == 10
        assert time.monotonic() - began < 5  # never waits for an optimization
    assert "c" in store._optimizing  # it was started (it may already have finished)
    assert store.count("c", None) == written
    store.close()  # waits for a running optimizer, then closes
    assert not any(t.is_alive() for t in threading.enumerate() if t.name.startswith("optimize"))
    reopened = EdgeStore(tmp_path / "q")
    assert reopened.count("c", None) == written
    reopened.close()


@pytest.mark.qdrant_server
def test_the_server_refuses_a_missing_or_wrong_key(qdrant_server: object) -> None:
    server = qdrant_server
    for key in (None, "wrong-key"):
        store = build_store(Settings(qdrant_url=server.url, qdrant_api_key=key))  # type: ignore[attr-defined]
        with pytest.raises(QdrantAuthError) as caught:
            VectorIndex(store, f"k-{uuid.uuid4().hex[:6]}", "m", DIM).ensure()
        message = str(caught.value)
        assert "SIDECAR_QDRANT_API_KEY" in message and "\n" not in message
        if key:
            assert key not in message
        store.close()


@pytest.mark.qdrant_server
def test_the_api_key_is_never_shown(qdrant_server: object, caplog: pytest.LogCaptureFixture) -> None:
    key = qdrant_server.api_key  # type: ignore[attr-defined]
    settings = Settings(qdrant_url=qdrant_server.url, qdrant_api_key=key)  # type: ignore[attr-defined]
    assert key not in repr(settings) and key not in str(settings.model_dump())
    assert to_env(settings)["SIDECAR_QDRANT_API_KEY"] == key  # child processes get the value
    caplog.set_level(logging.DEBUG)
    store = build_store(settings)
    index = VectorIndex(store, f"k-{uuid.uuid4().hex[:6]}", "m", DIM)
    index.ensure()
    store.close()
    assert key not in caplog.text


@pytest.mark.qdrant_server
def test_cluster_layout_reaches_every_collection(qdrant_server: object) -> None:
    """SIDECAR_QDRANT_SHARD_NUMBER reaches every collection the sidecar creates: start-up's (and
    its cache) and a vectors reindex's target (asked of the server itself)."""
    from indexer.adapters.qdrant.targets import VectorTargets

    server = qdrant_server
    settings = Settings(qdrant_url=server.url, qdrant_api_key=server.api_key,  # type: ignore[attr-defined]
                        qdrant_shard_number=3)
    assert Settings().qdrant_layout == {}
    store = build_store(settings)
    index = VectorIndex(store, f"l-{uuid.uuid4().hex[:6]}", "m", DIM)
    index.ensure()
    VectorTargets(index).create(f"{index.collection}-t64")
    client = store.client  # type: ignore[attr-defined]
    for name in (index.collection, index.cache, f"{index.collection}-t64",
                 f"{index.collection}-t64-cache"):
        assert client.get_collection(name).config.params.shard_number == 3, name
    schema = client.get_collection(index.collection).payload_schema
    assert schema["mailbox_id"].params.is_tenant is True
    assert {"thread_key", "message_key", "content_hash"} <= set(schema)
    store.close()


def test_a_store_made_before_recipes_is_read_as_forai(tmp_path: Path) -> None:
    """A collection named without a recipe suffix (every one before recipes) holds ``forai``:
    a process configured for subject-forai keeps searching and writing it as forai until
    ``sidecar reindex --vectors`` moves the alias; nothing is created beside it."""
    from indexer.adapters.embedding.embedder import DIMENSION, MODEL_SLUG
    from indexer.adapters.qdrant import targets as vt
    from indexer.ops.engines import read_recipe

    store = EdgeStore(tmp_path / "q")
    try:
        VectorIndex(store, "mail", MODEL_SLUG, DIMENSION, "forai").ensure()  # the old store
        index = VectorIndex(store, "mail", MODEL_SLUG, DIMENSION)  # today's default recipe
        index.ensure()
        assert index.collection == f"mail-{MODEL_SLUG}-subject-forai"
        assert store.aliases() == {index.alias: f"mail-{MODEL_SLUG}"}
        assert f"mail-{MODEL_SLUG}-subject-forai" not in store.collections()
        assert read_recipe(Settings(), index) == "forai"
        targets = vt.VectorTargets.of(index, [MODEL_SLUG], 256)
        assert targets.encoder_of(targets.targets()[0]).recipe == "forai"
    finally:
        store.close()
