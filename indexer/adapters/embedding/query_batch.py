"""Concurrent search queries encoded together: one forward pass for every query that waits.

Every semantic and hybrid request embeds its query. One text per forward pass wastes the CPU:
on the bench machine (2 cores, MiniLM, bfloat16) a pass over 8 short queries costs about 2.5
single passes, so 8 concurrent requests each encoding alone queue behind 8 full passes. Here
one encoder thread takes whatever queries are waiting, up to ``max_batch``, encodes them in
one pass and hands each caller its vector. Nothing waits on purpose: an idle encoder starts
on the first query at once; queries that arrive during a pass form the next one.

The API hands it :meth:`indexer.adapters.embedding.embedder.Embedder.embed_query`, which runs on the
queries' own small ONNX Runtime session, ahead of any document batch of the same process
(issue 42): a pass here never queues behind a batch of mail.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

Encode = Callable[[Sequence[str]], list[list[float]]]

_STOP = object()


class QueryBatcher:
    """``embed_query`` from many threads; ``encode`` runs on one thread of its own."""

    def __init__(self, encode: Encode, max_batch: int = 32) -> None:
        self._encode, self._max = encode, max_batch
        self._waiting: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="query-encoder", daemon=True)
        self._thread.start()

    def embed_query(self, texts: Sequence[str], timeout_s: float = 60.0) -> list[list[float]]:
        """The vectors of ``texts`` (the caller's own; encoded with whatever else waits)."""
        futures = []
        for text in texts:
            future: Future[list[float]] = Future()
            self._waiting.put((text, future))
            futures.append(future)
        return [f.result(timeout=timeout_s) for f in futures]

    def close(self) -> None:
        self._waiting.put(_STOP)
        self._thread.join(timeout=5)

    def _take(self) -> list[tuple[str, Future[list[float]]]] | None:
        """Block for one query, then everything already waiting (None: closed)."""
        first = self._waiting.get()
        if first is _STOP:
            return None
        batch = [first]
        while len(batch) < self._max:
            try:
                item = self._waiting.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                self._waiting.put(_STOP)  # finish this batch, then stop
                break
            batch.append(item)
        return batch  # type: ignore[return-value]  # only (text, future) pairs besides _STOP

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            try:
                vectors = self._encode([text for text, _ in batch])
            except Exception as exc:  # every caller of the pass sees the failure
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, future), vector in zip(batch, vectors, strict=True):
                future.set_result(vector)
