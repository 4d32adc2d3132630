"""The worker's tasks run in the bench's own process, on metered clients (``bench-cost``).

Why in process: the units a task costs are counted by botocore hooks on the clients it uses
(:mod:`sidecar_tools.bench.meter`), and a Celery worker is another process. A task here does
what :mod:`indexer.pipeline.tasks` does with its payload — ``sync_fulltext`` with the
payload's participant refs, ``sync_vectors`` into the configured collection — at the moment it
is sent, so the product's :class:`~indexer.pipeline.ingest.Ingestor` still cuts the batches
and builds the payloads. Left out: Celery itself, dead-lettering (a poison message fails the
bench) and the vectors task's ``get_aliases`` call to Qdrant (Qdrant is not counted).

:func:`instrumented` points the product's own seams at the meter for a backfill: every
``indexer.adapters.aws.clients.client`` is metered, and the backfills' ``ingestor`` sends to this
worker (``indexer.sources.scan`` feeds through ``indexer.sources.backfill.feed``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from indexer.adapters.dynamodb.store import DynamoStore
from indexer.adapters.embedding.embedder import Embedder
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.adapters.qdrant.index import VectorIndex
from indexer.core.plan import MessageRef
from indexer.core.recipes import Recipe
from indexer.core.records import RawRecord
from indexer.core.task_payload import TaskPayload
from indexer.pipeline.ingest import Ingestor
from indexer.pipeline.sync import sync_fulltext, sync_vectors
from indexer.settings import Settings
from sidecar_tools.bench.meter import Meter


@dataclass
class Done:
    """A task already run: its result, as a Celery ``AsyncResult`` would give it."""

    result: dict[str, Any]

    def get(self, timeout: float | None = None, propagate: bool = True) -> Any:
        return self.result

    def ready(self) -> bool:
        return True


@dataclass
class InProcessWorker:
    """Runs each task when it is sent; counts the syncs of each message per stage."""

    store: DynamoStore
    fulltext: OpenSearchIndex
    vectors: VectorIndex
    embedder: Embedder
    recipe: Recipe
    syncs: dict[str, Counter[MessageRef]] = field(
        default_factory=lambda: {"fulltext": Counter(), "vectors": Counter()})
    tasks: Counter[str] = field(default_factory=Counter)
    undecodable: list[str] = field(default_factory=list)
    first_read: str = "eventual"  # SIDECAR_FIRST_READ of the path's settings

    def eventual(self, task: TaskPayload) -> bool:
        return task.first_read_eventual(self.first_read)

    def send(self, stage: str, payload: dict[str, Any]) -> Done:
        task = TaskPayload.from_json(payload)
        refs = list(task.messages)
        self.tasks[stage] += 1
        self.syncs[stage].update(refs)
        if stage == "fulltext":
            outcome = sync_fulltext(self.store, self.fulltext, refs, list(task.participants),
                                    eventual=self.eventual(task))
        else:
            outcome = sync_vectors(self.store, self.vectors, self.embedder, refs, self.recipe,
                                   eventual=self.eventual(task))
        if outcome.poison:
            raise RuntimeError(f"{stage}: poison messages {outcome.poison}")
        return Done({"stage": stage, "dead_lettered": [], "embedded": outcome.embedded,
                     "messages": len(refs)})

    def _dead_letter(self, item: RawRecord, reason: str) -> None:
        self.undecodable.append(f"{item.source}: {reason}")

    def ingestor(self, batch_messages: int, *, replay: bool = False) -> Ingestor:
        """The product's ingestor, sending to this worker."""
        return Ingestor(self.send, self._dead_letter, batch_messages, replay=replay)


@contextmanager
def instrumented(meter: Meter, worker: InProcessWorker) -> Iterator[None]:
    """While inside: every client ``indexer.adapters.aws.clients.client`` builds is metered, and the
    backfills send their tasks to ``worker``. Restored on exit."""
    from indexer.adapters.aws import clients as aws
    from indexer.sources import backfill

    plain_client, plain_ingestor = aws.client, vars(backfill)["ingestor"]

    def client(settings: Settings, service: str) -> Any:
        return meter.attach(plain_client(settings, service))

    def ingestor(settings: Settings, *, replay: bool = False) -> Ingestor:
        return worker.ingestor(settings.batch_messages, replay=replay)

    setattr(aws, "client", client)  # noqa: B010 - the seam is the module attribute itself
    setattr(backfill, "ingestor", ingestor)  # noqa: B010
    try:
        yield
    finally:
        setattr(aws, "client", plain_client)  # noqa: B010
        setattr(backfill, "ingestor", plain_ingestor)  # noqa: B010
