"""Processes per role: full text 2 by default (its tasks mostly wait on I/O) beside a threads
worker for the batches' contact recounts, vectors 1 (CPU-bound; always 1 with the embedded
store, which admits one owner process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexer.pipeline.workers import CONTACTS_THREADS, WORKERS, worker_argv
from indexer.settings import Settings


def _processes(argv: list[str]) -> int:
    return int(argv[argv.index("-c") + 1])


def _option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


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


def test_contact_recounts_run_on_their_own_queue_in_threads_beside_the_full_text_workers(
) -> None:
    """A recount mostly waits for a refresh: it must not hold a batch's process (prefork) nor
    sit on the batches' queue."""
    settings = Settings()
    assert WORKERS["fulltext"] == ("fulltext", "contacts")
    assert "contacts" not in WORKERS["vectors"]
    batches = worker_argv(settings, "fulltext", 5, "INFO")
    recounts = worker_argv(settings, "contacts", 5, "INFO")
    assert (_option(batches, "-Q"), _option(batches, "-P")) == (settings.fulltext_queue,
                                                               "prefork")
    assert (_option(recounts, "-Q"), _option(recounts, "-P")) == (settings.contacts_queue,
                                                                 "threads")
    assert _processes(recounts) == CONTACTS_THREADS
    assert settings.contacts_queue not in (settings.fulltext_queue, settings.vectors_queue)


def test_a_batch_publishes_its_recounts_on_the_contacts_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The queue the full-text role's threads consume (the publish itself recorded, not sent)."""
    from indexer.core.plan import MessageRef
    from indexer.pipeline import contacts_task
    from indexer.pipeline.contacts_sync import Recount

    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(contacts_task.contacts, "apply_async",
                        lambda **kwargs: sent.append(kwargs))
    settings = Settings()
    contacts_task.defer_to(settings)(
        Recount("box", frozenset({"a@example.com"}), {MessageRef("box", "k1"): True}))
    [publish] = sent
    assert publish["queue"] == settings.contacts_queue
    assert publish["args"][0]["mailbox"] == "box"
