"""The vector collections' layout (issue 39): per-tenant graphs and int8 vectors, both backends.

New collections are created with ``m`` 0 / ``payload_m`` 16 (one graph per mailbox on the
``is_tenant`` index), int8 scalar quantization in RAM with the float32 originals on disk and
the other keyword indexes on disk;
searches rescore with the originals. A collection of the layout before (float32, global
graph) keeps working beside them: the same store searches both, and both agree with an exact
search of the same mailbox. Recall at scale is measured by ``sidecar bench-tenants``.
"""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters.qdrant.edge import EdgeStore
from indexer.adapters.qdrant.index import build_store
from indexer.adapters.qdrant.server import ServerStore
from indexer.core.vectors import PointWrite, VectorStore, match
from indexer.settings import Settings

DIM = 32
BACKENDS = ["edge", pytest.param("server", marks=pytest.mark.qdrant_server)]


def _unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def _stores(kind: str, request: pytest.FixtureRequest, tmp: Path) -> tuple[Any, Any]:
    if kind == "edge":
        return EdgeStore(tmp / "new"), EdgeStore(tmp / "old", compact=False)
    server = request.getfixturevalue("qdrant_server")
    settings = Settings(qdrant_url=server.url, qdrant_api_key=server.api_key)
    new, old = build_store(settings), build_store(settings)
    assert isinstance(new, ServerStore) and isinstance(old, ServerStore)
    assert new.compact  # the default every role gets
    old.compact = False
    return new, old


@pytest.fixture(params=BACKENDS)
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any, Any]]:
    """(backend, a store creating the new layout, one creating the old layout)."""
    new, old = _stores(request.param, request, tmp_path)
    yield request.param, new, old
    for store in (new, old):
        store.close()


def _config(kind: str, store: Any, collection: str) -> dict[str, Any]:
    """What the engine says the collection was created with (its own record of it)."""
    if kind == "edge":
        found: dict[str, Any] = json.loads(
            (store.root / "collections" / collection / "edge_config.json").read_text())
        vectors, hnsw = found["vectors"][""], found.get("hnsw_config") or {}
        folder = store.root / "collections" / collection / "segments"
        fields: dict[str, Any] = {}
        for seg in folder.glob("*/payload_index/config.json"):  # the segments agree
            fields.update(json.loads(seg.read_text())["indexed_fields"])
        # no hnsw_config: the engine's default graph (m 16, no payload_m)
        return {"m": hnsw.get("m", 16), "payload_m": hnsw.get("payload_m"),
                "quantization": vectors.get("quantization_config"),
                "on_disk": bool(vectors.get("on_disk")),
                "keyword_on_disk": {k: isinstance(v, dict) and bool(v.get("on_disk"))
                                    for k, v in fields.items()}}
    whole = store.client.get_collection(collection)
    info = whole.config
    quantization = info.quantization_config
    return {"m": info.hnsw_config.m, "payload_m": info.hnsw_config.payload_m,
            "quantization": None if quantization is None else quantization.model_dump(
                exclude_none=True, mode="json"),
            "on_disk": bool(info.params.vectors.on_disk),
            "keyword_on_disk": {k: bool(getattr(v.params, "on_disk", None))
                                for k, v in (whole.payload_schema or {}).items()}}


def test_new_collections_get_tenant_graphs_and_int8(both: tuple[str, Any, Any]) -> None:
    kind, new, old = both
    name = f"layout-{uuid.uuid4().hex[:8]}"
    new.create(name, DIM, ("thread_key",))
    old.create(f"{name}-old", DIM, ("thread_key",))
    made = _config(kind, new, name)
    assert (made["m"], made["payload_m"], made["on_disk"]) == (0, 16, True)
    assert made["quantization"] == {
        "scalar": {"type": "int8", "quantile": 0.99, "always_ram": True}}
    # the per-point keyword index off the heap, the tenant index (every search) in RAM
    assert made["keyword_on_disk"] == {"mailbox_id": False, "thread_key": True}
    before = _config(kind, old, f"{name}-old")
    assert before["quantization"] is None and before["m"] == 16 and not before["on_disk"]
    assert before["keyword_on_disk"] == {"mailbox_id": False, "thread_key": False}


def _filled(store: VectorStore, name: str, rng: random.Random) -> None:
    store.create(name, DIM, ())
    points = [PointWrite(str(uuid.UUID(int=n + 1)), _unit(rng),
                         {"mailbox_id": "whale" if n % 2 else f"small-{n % 7}"})
              for n in range(600)]
    store.upsert(name, points)
    store.flush()


def test_both_layouts_search_alike_and_match_exact_search(both: tuple[str, Any, Any]) -> None:
    """An old collection searched by the new code (its rescoring parameters ask nothing of a
    collection without quantization) and a new one: the same top 10 as an exact search."""
    _, new, old = both
    name = f"layout-{uuid.uuid4().hex[:8]}"
    _filled(new, name, random.Random(3))
    _filled(old, f"{name}-old", random.Random(3))
    rng = random.Random(9)
    for _ in range(10):
        query = _unit(rng)
        for store, collection in ((new, name), (old, f"{name}-old")):
            found = [h.id for h in store.search(collection, query, match("mailbox_id", "whale"),
                                                10)]
            exact = [h.id for h in store.search(collection, query, match("mailbox_id", "whale"),
                                                10, exact=True)]
            assert found == exact
            assert len(found) == 10
