"""Convergence property test against the real engines (design invariants 1 and 2).

Random sequences of writer operations (store, rewrite in place, delete, store again) over a
few messages in two mailboxes run against moto while concurrent workers process the stream
records as they appear — shuffled, duplicated, split into batches — and then all records are
replayed late once more. Afterwards both indexes must equal what the table holds, and no
deleted message may be present.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opensearchpy import NotFoundError

from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.streams import iter_stream_records, latest_stream_arn
from indexer.adapters.dynamodb.store import DynamoStore
from indexer.adapters.dynamodb.tables import init_tables
from indexer.adapters.embedding.embedder import DIMENSION, Embedder
from indexer.adapters.factories import vector_slug
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.adapters.qdrant.index import VectorIndex
from indexer.core.documents import point_id, search_document, vector_target
from indexer.core.plan import MessageRef, plan_records
from indexer.core.records import decode_record
from indexer.pipeline.sync import sync_fulltext, sync_vectors
from indexer.settings import Settings
from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import delete_message, rewrite_message, store_message

pytestmark = [pytest.mark.stack, pytest.mark.slow]

MESSAGES = 3
OPS = st.lists(
    st.tuples(
        st.sampled_from(["store", "rewrite", "delete"]),
        st.integers(0, MESSAGES - 1),  # message
        st.integers(0, 1),  # mailbox
        st.integers(0, 2),  # content variant
    ),
    min_size=1,
    max_size=12,
)


def email(i: int, variant: int) -> dict[str, Any]:
    forai = [f"note {i} about kernels", f"note {i} about gardens", None][variant]
    return {
        "messageId": f"<m{i}@example.org>",
        "threadId": f"<t{i % 2}@example.org>",
        "metadata": {
            "from": {"name": "Ann", "email": f"Ann{i}@Example.org"},
            "to": [{"name": "Bo", "email": f"bo{variant}@example.org"}],
            "cc": [{"name": None, "email": "list@example.org"}] if i % 2 else [],
            "bcc": [{"name": None, "email": "hidden@example.org"}],
            "subject": f"subject {i} v{variant}",
            "date": f"2024-01-0{i + 1}T10:00:00Z",
            "timestamp": 1704103200 + 86400 * i,
        },
        "content": {
            "text": f"text {i} {variant}",
            "clean": f"clean body {i} variant {variant}",
            "forAI": forai,
        },
        "processing": {"processedAt": "2024-02-01T00:00:00Z", "specVersion": f"1.{variant}"},
    }


class World:
    """One table and the adapters the workers use, shared by all threads."""

    def __init__(
        self, base: Settings, qdrant: Any, embedder: Embedder, opensearch: OpenSearchIndex
    ) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.table = f"conv-{suffix}"
        self.mailboxes = [f"alpha-{suffix}", f"bêta ü-{suffix}"]
        own = base.model_copy(update={"table": self.table, "state_table": ""})
        self.ddb = aws.client(own, "dynamodb")  # its calls are recorded against these tables
        self.streams = aws.client(own, "dynamodbstreams")
        self.store = SlowStore(self.ddb, self.table, f"{self.table}-sidecar")
        init_tables(self.ddb, own, mail_table=True)
        self.opensearch = opensearch
        self.vectors = qdrant
        self.embedder = embedder
        self.seen = 0

    def apply(self, op: str, i: int, mailbox: int, variant: int) -> None:
        items = to_items(email(i, variant), self.mailboxes[mailbox])
        if op == "store":
            store_message(self.ddb, self.table, items)
        elif op == "rewrite":
            rewrite_message(self.ddb, self.table, items)
        else:
            delete_message(self.ddb, self.table, self.mailboxes[mailbox], f"<m{i}@example.org>")

    def records(self) -> list[dict[str, Any]]:
        return list(iter_stream_records(self.streams, latest_stream_arn(self.ddb, self.table)))

    def new_records(self) -> list[dict[str, Any]]:
        records = self.records()
        fresh, self.seen = records[self.seen :], len(records)
        return fresh

    def process(self, batch: list[dict[str, Any]]) -> None:
        plan = plan_records(decode_record(r) for r in batch)
        if plan.fulltext:
            sync_fulltext(self.store, self.opensearch, plan.fulltext, plan.participants)
        if plan.vectors:
            sync_vectors(self.store, self.vectors, self.embedder, plan.vectors)


class SlowStore(DynamoStore):
    """The real adapter, with a random pause after each read: races become likely."""

    rng = random.Random(7)

    def read_states(self, refs: Any, *, participants: bool) -> Any:
        states = super().read_states(refs, participants=participants)
        time.sleep(self.rng.uniform(0, 0.03))  # a random delay provokes the races (not a wait)
        return states


def shuffled_batches(
    records: list[dict[str, Any]], older: list[dict[str, Any]], rng: random.Random
) -> Iterator[list[dict[str, Any]]]:
    pool = records + rng.sample(older, k=min(len(older), len(records)))  # late duplicates
    rng.shuffle(pool)
    while pool:
        size = rng.randint(1, 6)
        yield pool[:size]
        pool = pool[size:]


@pytest.fixture(scope="module")
def engines(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Settings, VectorIndex, Embedder, OpenSearchIndex]]:
    from indexer.adapters.qdrant.edge import EdgeStore

    unique = uuid.uuid4().hex[:8]
    base = Settings(opensearch_index=f"conv-{unique}", qdrant_collection=f"conv-{unique}")
    client = EdgeStore(tmp_path_factory.mktemp("qdrant"))
    vectors = VectorIndex(client, base.qdrant_collection, vector_slug(base), DIMENSION)
    vectors.ensure()
    opensearch = OpenSearchIndex(build_opensearch(base), base.opensearch_index)
    opensearch.ensure()
    yield base, vectors, Embedder(max_tokens=128, threads=2, batch_size=16), opensearch
    client.close()


def assert_converged(world: World) -> None:
    refs = {
        MessageRef(mb, to_items(email(i, 0), mb).message_key)
        for mb in world.mailboxes
        for i in range(MESSAGES)
    }
    states = world.store.read_states(refs, participants=True)
    client = world.opensearch.client
    for ref, state in states.items():
        expected = search_document(state)
        try:
            got = client.get(
                index=world.opensearch.alias, id=point_id(ref), routing=ref.mailbox_id
            )["_source"]
        except NotFoundError:
            got = None
        assert got == expected, f"full-text drift for {ref}"
        target = vector_target(state)
        points = world.vectors.store.retrieve(
            world.vectors.alias, [point_id(ref)], with_vector=False
        )
        payload = dict(points[0].payload or {}) if points else None
        assert payload == (dict(target.payload) if target.text is not None else None), (
            f"vector drift for {ref}"
        )
        if state.message is None:
            assert got is None and payload is None  # deletes stick


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS, seed=st.integers(0, 2**32 - 1))
def test_indexes_converge_to_the_table(
    engines: tuple[Settings, VectorIndex, Embedder, OpenSearchIndex],
    ops: list[tuple[str, int, int, int]],
    seed: int,
) -> None:
    base, vectors, embedder, opensearch = engines
    world = World(base, vectors, embedder, opensearch)
    rng = random.Random(seed)
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = []
        older: list[dict[str, Any]] = []
        for op in ops:
            world.apply(*op)
            fresh = world.new_records()
            futures += [pool.submit(world.process, b) for b in shuffled_batches(fresh, older, rng)]
            older += fresh
            time.sleep(rng.uniform(0, 0.02))  # jitter between writes: races (not a wait)
        for future in futures:
            future.result()
    assert_converged(world)


def test_convergence_check_detects_drift(
    engines: tuple[Settings, VectorIndex, Embedder, OpenSearchIndex],
) -> None:
    """The assertion above can fail: a stale document left behind is caught."""
    base, vectors, embedder, opensearch = engines
    world = World(base, vectors, embedder, opensearch)
    world.apply("store", 0, 0, 0)
    world.process(world.new_records())
    delete_message(
        world.ddb, world.table, world.mailboxes[0], "<m0@example.org>"
    )  # never processed
    with pytest.raises(AssertionError, match="drift"):
        assert_converged(world)


class PausingStore(DynamoStore):
    """The real adapter; when armed, the next read pauses until released (a stale reader)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.armed = False
        self.read_done = threading.Event()
        self.release = threading.Event()

    def read_states(self, refs: Any, *, participants: bool) -> Any:
        states = super().read_states(refs, participants=participants)
        if self.armed:
            self.armed = False
            self.read_done.set()
            self.release.wait(30)
        return states


def test_stale_reader_cannot_resurrect_a_deleted_message(
    engines: tuple[Settings, VectorIndex, Embedder, OpenSearchIndex],
) -> None:
    """Worker A reads the message, stalls; the message is deleted and worker B applies the
    delete; A then writes what it read. The verify step must remove A's stale write."""
    base, vectors, embedder, opensearch = engines
    world = World(base, vectors, embedder, opensearch)
    stalled = PausingStore(world.ddb, world.table, f"{world.table}-sidecar")
    world.apply("store", 1, 0, 0)
    first = world.new_records()
    world.process(first)

    stalled.armed = True
    plan = plan_records(decode_record(r) for r in first)
    with ThreadPoolExecutor(max_workers=2) as pool:
        a_text = pool.submit(
            sync_fulltext, stalled, world.opensearch, plan.fulltext, plan.participants
        )
        assert stalled.read_done.wait(30)
        world.apply("delete", 1, 0, 0)
        world.process(world.new_records())  # worker B
        stalled.release.set()
        a_text.result()
        assert_converged(world)
        stalled.read_done.clear()
        stalled.armed = True
        stalled.release.clear()
        world.apply("store", 1, 0, 1)
        world.process(world.new_records())
        a_vec = pool.submit(sync_vectors, stalled, world.vectors, world.embedder, plan.vectors)
        assert stalled.read_done.wait(30)
        world.apply("delete", 1, 0, 1)
        world.process(world.new_records())
        stalled.release.set()
        a_vec.result()
    assert_converged(world)
