"""The query batcher: queries waiting during a pass are encoded together, each caller gets its
own vector, a failure reaches every caller of its pass, and an idle encoder does not wait."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from indexer.adapters.embedding.query_batch import QueryBatcher
from tests.support.waiting import wait_for


class Recorder:
    """An encoder whose vector of a text is [len(text), first letter]; the first pass blocks
    until released, so that the other callers queue up behind it."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.started = threading.Event()  # the first pass is running (and blocked)
        self.release = threading.Event()

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        if not self.batches:
            self.started.set()
            self.release.wait(5)
        self.batches.append(list(texts))
        return [[float(len(t)), float(ord(t[0]))] for t in texts]


def _wait_queued(batcher: QueryBatcher, n: int) -> None:
    """Until ``n`` queries wait behind the blocked pass (the batcher's own queue)."""
    wait_for(lambda: batcher._waiting.qsize() >= n, timeout=5, interval=0.01,
             message=lambda: f"{batcher._waiting.qsize()} of {n} queries queued")


def test_queries_waiting_during_a_pass_form_one_batch() -> None:
    encode = Recorder()
    batcher = QueryBatcher(encode)
    texts = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg", "hhhhhhhh"]
    with ThreadPoolExecutor(len(texts)) as pool:
        first = pool.submit(batcher.embed_query, [texts[0]])
        assert encode.started.wait(5), "the first pass did not start"
        rest = [pool.submit(batcher.embed_query, [t]) for t in texts[1:]]
        _wait_queued(batcher, 7)
        encode.release.set()
        got = [first.result(5)] + [f.result(5) for f in rest]
    assert got == [[[float(len(t)), float(ord(t[0]))]] for t in texts]  # each its own
    assert encode.batches[0] == ["a"]
    assert sorted(encode.batches[1]) == sorted(texts[1:])  # one pass for the seven
    batcher.close()


def test_a_failed_pass_fails_its_callers_and_the_next_pass_runs() -> None:
    calls = []

    def encode(texts: Sequence[str]) -> list[list[float]]:
        calls.append(list(texts))
        if texts[0] == "boom":
            raise RuntimeError("encoder failed")
        return [[1.0] for _ in texts]

    batcher = QueryBatcher(encode)
    with pytest.raises(RuntimeError, match="encoder failed"):
        batcher.embed_query(["boom"])
    assert batcher.embed_query(["fine"]) == [[1.0]]
    batcher.close()


def test_max_batch_bounds_a_pass() -> None:
    encode = Recorder()
    batcher = QueryBatcher(encode, max_batch=3)
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(batcher.embed_query, ["x"])
        assert encode.started.wait(5), "the first pass did not start"
        rest = [pool.submit(batcher.embed_query, [f"q{i}"]) for i in range(7)]
        _wait_queued(batcher, 7)
        encode.release.set()
        first.result(5)
        for future in rest:
            future.result(5)
    assert max(len(b) for b in encode.batches) <= 3
    assert sum(len(b) for b in encode.batches) == 8
    batcher.close()
