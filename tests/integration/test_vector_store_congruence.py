"""One test body per behaviour of the vector store port, run against every backend: Qdrant Edge
embedded in this process, and a real Qdrant server (over HTTP, and over gRPC) — asserting the
same answers, which are computed here independently (exact cosine ranking in Python).

The server tests need the Qdrant binary of ``../shared/tools/qdrant``; without it they are not
collected and the session says so in one line (``tests/conftest.py``).
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters.qdrant.edge import EdgeStore
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.errors import PoisonError
from indexer.core.vectors import (
    Filter,
    Match,
    MatchAny,
    PointWrite,
    Range,
    VectorStore,
    match,
)
from indexer.settings import Settings

DIM = 8
BACKENDS = [
    "edge",
    pytest.param("server-http", marks=pytest.mark.qdrant_server),
    pytest.param("server-grpc", marks=pytest.mark.qdrant_server),
]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "edge":
        opened: VectorStore = EdgeStore(tmp_path / "edge")
    else:
        server = request.getfixturevalue("qdrant_server")
        opened = build_store(
            Settings(
                qdrant_url=server.url,
                qdrant_api_key=server.api_key,
                qdrant_prefer_grpc=request.param == "server-grpc",
                qdrant_grpc_port=server.grpc_port,
            )
        )
    yield opened
    opened.close()


@pytest.fixture
def name() -> str:
    return f"c-{uuid.uuid4().hex[:10]}"


def unit(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def points(n: int, seed: int = 7) -> list[PointWrite]:
    rng = random.Random(seed)
    return [
        PointWrite(
            str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{i}")),
            unit(rng),
            {"mailbox_id": f"box{i % 3}", "thread_key": f"t{i % 7}", "message_key": f"m{i}",
             "ts": i, "from": f"a{i % 4}@x"},
        )
        for i in range(n)
    ]


def exact(pts: list[PointWrite], query: list[float], keep: Any, limit: int) -> list[str]:
    """The exact top-``limit`` ids by cosine (vectors are unit length) among ``keep``'s points."""
    scored = [(sum(a * b for a, b in zip(p.vector, query, strict=True)), p.id)
              for p in pts if keep(p.payload)]
    return [pid for _, pid in sorted(scored, reverse=True)[:limit]]


def ids(store: VectorStore, collection: str, flt: Filter | None = None) -> list[str]:
    return [p.id for page in store.scroll(collection, flt, ["message_key"]) for p in page]


def test_upsert_and_delete_are_idempotent(store: VectorStore, name: str) -> None:
    store.create(name, DIM, ("thread_key", "message_key"))
    store.create(name, DIM, ("thread_key", "message_key"))  # idempotent
    assert name in store.collections()
    pts = points(30)
    store.upsert(name, pts)
    store.upsert(name, pts)  # the same points again: still 30
    store.flush()
    assert store.count(name, None) == 30
    gone = [p.id for p in pts[:5]]
    store.delete(name, gone)
    store.delete(name, gone)  # delete twice: no error, nothing else removed
    store.delete(name, [str(uuid.uuid4())])  # an id never stored
    store.flush()
    assert store.count(name, None) == 25
    assert store.retrieve(name, gone, with_vector=False) == []
    found = store.retrieve(name, [pts[7].id], with_vector=True)
    assert [p.id for p in found] == [pts[7].id] and found[0].payload == pts[7].payload
    assert found[0].vector == pytest.approx(list(pts[7].vector), abs=1e-5)
    assert store.retrieve(name, [pts[7].id], with_vector=False)[0].vector is None


def test_filtered_search_matches_the_exact_answer(store: VectorStore, name: str) -> None:
    store.create(name, DIM, ("thread_key", "message_key"))
    pts = points(300)
    store.upsert(name, pts)
    store.flush()
    rng = random.Random(3)
    cases: list[tuple[Filter, Any]] = [
        (match("mailbox_id", "box1"), lambda p: p["mailbox_id"] == "box1"),
        (Filter(must=(Match("mailbox_id", "box0"), Match("thread_key", "t3"))),
         lambda p: p["mailbox_id"] == "box0" and p["thread_key"] == "t3"),
        (Filter(must=(Match("mailbox_id", "box2"), Range("ts", gte=50, lt=200))),
         lambda p: p["mailbox_id"] == "box2" and 50 <= p["ts"] < 200),
        (Filter(must=(Match("mailbox_id", "box2"), MatchAny("from", ("a1@x", "a3@x")))),
         lambda p: p["mailbox_id"] == "box2" and p["from"] in ("a1@x", "a3@x")),
        (Filter(must=(Match("mailbox_id", "box1"),),
                must_not=(Match("thread_key", "t1"), Match("message_key", "m4"))),
         lambda p: p["mailbox_id"] == "box1" and p["thread_key"] != "t1"
         and p["message_key"] != "m4"),
        (Filter(must=(Match("mailbox_id", "nobody"),)), lambda p: False),
    ]
    for flt, keep in cases:
        for _ in range(3):
            query = unit(rng)
            hits = store.search(name, query, flt, 10)
            assert [h.id for h in hits] == exact(pts, query, keep, 10), flt
            assert all(keep(h.payload) for h in hits)
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert store.count(name, flt) == sum(1 for p in pts if keep(p.payload))


def test_payload_overwrite_replaces_the_whole_payload(store: VectorStore, name: str) -> None:
    store.create(name, DIM, ("thread_key", "message_key"))
    pts = points(12)
    store.upsert(name, pts)
    fresh = {"mailbox_id": "box9", "thread_key": "t9", "message_key": "m0", "ts": 1}
    store.overwrite_payload(name, pts[0].id, fresh)
    store.flush()
    assert store.retrieve(name, [pts[0].id], with_vector=False)[0].payload == fresh
    hits = store.search(name, list(pts[0].vector), match("mailbox_id", "box9"), 5)
    assert [h.id for h in hits] == [pts[0].id]
    # box0 held points 0, 3, 6 and 9: the three left still answer, p0 no longer does.
    assert set(ids(store, name, match("mailbox_id", "box0"))) == {pts[i].id for i in (3, 6, 9)}


def test_scroll_is_complete_and_delete_by_filter_is_scoped(store: VectorStore, name: str) -> None:
    store.create(name, DIM, ("thread_key", "message_key"))
    pts = points(1300)  # more than two scroll pages of 512
    for start in range(0, len(pts), 400):
        store.upsert(name, pts[start : start + 400])
    store.flush()
    every = ids(store, name)
    assert len(every) == len(set(every)) == 1300 and set(every) == {p.id for p in pts}
    box1 = {p.id for p in pts if p.payload["mailbox_id"] == "box1"}
    assert set(ids(store, name, match("mailbox_id", "box1"))) == box1
    fields = next(store.scroll(name, None, ["mailbox_id"]))
    assert all(set(p.payload) == {"mailbox_id"} for p in fields)
    store.delete_by_filter(name, match("mailbox_id", "box1"))
    store.flush()
    assert store.count(name, match("mailbox_id", "box1")) == 0
    assert store.count(name, None) == 1300 - len(box1)


def test_aliases_swap_at_once(store: VectorStore, name: str) -> None:
    a, b = f"{name}-a", f"{name}-b"
    read, write = f"{name}-vectors", f"{name}-vectors-write"
    for collection, pts in ((a, points(5, seed=1)), (b, points(9, seed=2))):
        store.create(collection, DIM, ("message_key",))
        store.upsert(collection, pts)
    store.flush()
    store.set_aliases({read: a, write: None})
    assert {k: v for k, v in store.aliases().items() if k.startswith(name)} == {read: a}
    assert store.count(read, None) == 5
    store.set_aliases({read: b, write: a})  # one call: the swap of a vectors reindex
    assert {k: v for k, v in store.aliases().items() if k.startswith(name)} == {read: b, write: a}
    assert store.count(read, None) == 9 and store.count(write, None) == 5
    extra = PointWrite(str(uuid.uuid4()), unit(random.Random(5)), {"mailbox_id": "box0"})
    store.upsert(write, [extra])  # a write through an alias lands in its collection
    store.flush()
    assert store.count(a, None) == 6
    store.set_aliases({write: None})
    store.drop(a)
    store.drop(a)  # dropping twice is fine
    assert a not in store.collections()
    assert {k: v for k, v in store.aliases().items() if k.startswith(name)} == {read: b}


def test_the_index_cache_hits_and_misses(store: VectorStore, name: str) -> None:
    index = VectorIndex(store, name, "model", DIM)
    index.ensure()
    index.ensure()
    assert store.aliases()[index.alias] == index.collection
    assert {index.collection, index.cache} <= store.collections()
    vec = unit(random.Random(1))
    index.remember({"h1": vec})
    index.flush()
    found = index.cached_vectors(["h1", "h2"])
    assert set(found) == {"h1"} and found["h1"] == pytest.approx(vec, abs=1e-5)
    assert index.cached_vectors([]) == {}


def test_a_wrong_vector_is_poison(store: VectorStore, name: str) -> None:
    store.create(name, DIM, ())
    with pytest.raises(PoisonError):
        store.upsert(name, [PointWrite(str(uuid.uuid4()), [0.1] * (DIM + 1), {})])
