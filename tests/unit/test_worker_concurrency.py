"""Processes per role: full text 2 by default (its tasks mostly wait on I/O, and its queue
also carries each batch's contact recount), vectors 1 (CPU-bound; always 1 with the embedded
store, which admits one owner process)."""

from __future__ import annotations

from pathlib import Path

from indexer.pipeline.workers import worker_argv
from indexer.settings import Settings


def _processes(argv: list[str]) -> int:
    return int(argv[argv.index("-c") + 1])


def test_full_text_runs_two_processes_unless_told() -> None:
    settings = Settings()
    assert _processes(worker_argv(settings, "fulltext", None, "INFO")) == 2
    assert _processes(worker_argv(settings, "fulltext", 5, "INFO")) == 5


def test_vectors_run_one_process_and_only_one_with_the_embedded_store(tmp_path: Path) -> None:
    embedded = Settings(qdrant_path=tmp_path / "q")
    server = Settings(qdrant_url="http://127.0.0.1:6333")
    assert _processes(worker_argv(server, "vectors", None, "INFO")) == 1
    assert _processes(worker_argv(server, "vectors", 3, "INFO")) == 3
    assert _processes(worker_argv(embedded, "vectors", 3, "INFO")) == 1
