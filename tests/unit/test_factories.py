"""Per-process adapters are built once even when many threads ask first at the same time
(an API's request threads): a second open of the embedded store would fail on its lock."""

from __future__ import annotations

import threading
from pathlib import Path

from indexer.adapters import factories
from indexer.settings import Settings


def test_concurrent_first_calls_build_one_vector_index(tmp_path: Path) -> None:
    settings = Settings(qdrant_path=tmp_path / "qdrant", qdrant_collection="race")
    factories.vector_index(settings).close()  # the collection exists; the next open is fast
    factories.vector_index.cache_clear()
    barrier, got, errors = threading.Barrier(8), [], []

    def first_call() -> None:
        barrier.wait()
        try:
            got.append(factories.vector_index(settings))
        except Exception as exc:  # the race lost: StoreBusyError from the owner's lock
            errors.append(exc)

    threads = [threading.Thread(target=first_call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == []
        assert len({id(index) for index in got}) == 1
    finally:
        factories.vector_index(settings).close()
        factories.vector_index.cache_clear()
