"""What a worker process's tasks use, built once per process: the settings and the
adapters they are synced with (the table, the full-text index, the dead-letter store).

The worker installs it when each pool process starts (``worker_process_init``,
:mod:`indexer.pipeline.celery_app`); a task run elsewhere (the API's embedded vectors
consumer, an eager test) builds it on first use. The adapters are opened lazily: an engine
down at start is a task's transient failure, retried, not a worker that cannot start.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property

from indexer.adapters import factories
from indexer.adapters.dynamodb.dlq import DeadLetterStore
from indexer.adapters.dynamodb.store import DynamoStore
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.settings import Settings, get_settings


@dataclass
class WorkerContext:
    """One process's settings and adapters (each built on first use, then kept)."""

    settings: Settings

    @cached_property
    def store(self) -> DynamoStore:
        return factories.store(self.settings)

    @cached_property
    def fulltext(self) -> OpenSearchIndex:
        return factories.fulltext_index(self.settings)

    @cached_property
    def dead_letters(self) -> DeadLetterStore:
        return factories.dead_letters(self.settings)


_lock = threading.Lock()
_current: WorkerContext | None = None


def install(settings: Settings | None = None) -> WorkerContext:
    """Build this process's context (the worker's start-up), replacing any before it."""
    global _current
    built = WorkerContext(settings or get_settings())
    with _lock:
        _current = built
    return built


def current() -> WorkerContext:
    """This process's context: the installed one, else one built now and kept."""
    global _current
    with _lock:
        if _current is None:
            _current = WorkerContext(get_settings())
        return _current
