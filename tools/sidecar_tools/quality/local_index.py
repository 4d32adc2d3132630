"""Load a corpus into a table and index it in this process, through the real pipeline core.

The table is written by the store writer (bulk mode: moto is slow), its stream is exported
and fed to the same :class:`Ingestor` (decode, plan, batch) and the same read-write-verify
sync the Celery workers run; only the queue is left out, so an evaluation needs no worker
and this process owns the embedded vector store for the queries that follow.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.streams import export_records
from indexer.adapters.dynamodb.tables import init_tables
from indexer.adapters.opensearch.family import MAPPING_VERSION
from indexer.core.plan import MessageRef, ParticipantRef
from indexer.pipeline.ingest import Ingestor, IngestSummary
from indexer.pipeline.sync import Outcome, sync_fulltext, sync_vectors
from indexer.settings import Settings
from indexer.sources.files import RawRecord, read_sources
from sidecar_tools.writer.files import load_file


def _result(outcome: Outcome) -> dict[str, Any]:
    return {
        "dead_lettered": [r.to_json() for r in outcome.poison],
        "embedded": outcome.embedded,
    }


@dataclass(frozen=True)
class Pending:
    """A stage's batch running in this process: what the Ingestor waits on."""

    future: Future[Outcome]

    def get(self, timeout: float | None = None, propagate: bool = True) -> dict[str, Any]:
        # Blocks until done, whatever ``timeout``: in-process work cannot be lost on the way,
        # and the Ingestor's polling expects Celery's own timeout type, not ours.
        return _result(self.future.result())

    def ready(self) -> bool:
        return self.future.done()


def local_send(settings: Settings, lanes: dict[str, ThreadPoolExecutor]) -> Any:
    """A ``Send`` that runs the full-text or vectors sync in this process, one lane (thread)
    per stage as one worker per queue would: full-text reads overlap embedding, and each
    stage's batches stay in order (the embedded vector store is used by one thread only)."""

    def fulltext(payload: dict[str, Any]) -> Outcome:
        people = [ParticipantRef.from_json(raw) for raw in payload.get("participants", [])]
        index = factories.fulltext_index(settings)
        return sync_fulltext(factories.store(settings), index, _refs(payload), people)

    def vectors(payload: dict[str, Any]) -> Outcome:
        index, embedder = factories.vector_index(settings), factories.embedder(settings)
        refs = _refs(payload)  # a fresh namespace: the alias names the configured recipe's
        return sync_vectors(factories.store(settings), index, embedder, refs, index.recipe)

    work = {"fulltext": fulltext, "vectors": vectors}

    def send(stage: str, payload: dict[str, Any]) -> Pending:
        return Pending(lanes[stage].submit(work[stage], payload))

    return send


def _refs(payload: dict[str, Any]) -> list[MessageRef]:
    return [MessageRef.from_json(raw) for raw in payload.get("messages", [])]


def _refuse(item: RawRecord, reason: str) -> None:
    raise RuntimeError(f"undecodable stream record from {item.source}: {reason}")


def load_corpus(settings: Settings, corpus: Path, mailbox: str) -> int:
    """Store ``corpus`` under ``mailbox`` (tables created if missing); returns messages stored."""
    ddb = aws.client(settings, "dynamodb")
    init_tables(ddb, settings, mail_table=True)
    loaded = load_file(ddb, settings.table, corpus, mailbox, atomic=False)
    if loaded.rejected:
        raise ValueError(f"{corpus}: {len(loaded.rejected)} line(s) rejected: {loaded.rejected[0]}")
    return loaded.stored


def index_table(settings: Settings, workdir: Path) -> IngestSummary:
    """Export the table's stream and apply every record to both indexes, in this process."""
    records = workdir / f"stream-{uuid.uuid4().hex[:8]}.jsonl"
    export_records(
        aws.client(settings, "dynamodb"),
        aws.client(settings, "dynamodbstreams"),
        settings.table,
        records,
    )
    factories.vector_index(settings)  # opened here, before the lanes use it
    with (
        ThreadPoolExecutor(1, "fulltext") as text_lane,
        ThreadPoolExecutor(1, "vectors") as vector_lane,
    ):
        lanes = {"fulltext": text_lane, "vectors": vector_lane}
        ingest = Ingestor(local_send(settings, lanes), _refuse, settings.batch_messages)
        ingest.feed_all(read_sources([str(records)], aws.client(settings, "s3")))
        summary = ingest.wait()
    index = factories.fulltext_index(settings)
    index.client.indices.refresh(index=index.alias)
    return summary


def index_corpus(settings: Settings, corpus: Path, mailbox: str, workdir: Path) -> IngestSummary:
    """Store ``corpus`` under ``mailbox`` and index the table."""
    load_corpus(settings, corpus, mailbox)
    return index_table(settings, workdir)


def eval_settings(base: Settings, workdir: Path) -> Settings:
    """``base`` with a namespace of its own: table, index alias, collection, queues."""
    tag = f"eval-{uuid.uuid4().hex[:8]}"
    return base.model_copy(
        update={
            "table": tag,
            "state_table": f"{tag}-sidecar",
            "opensearch_index": tag,
            "qdrant_collection": tag,
            "qdrant_url": None,
            "qdrant_path": workdir / "qdrant",
            "queue_prefix": tag,
        }
    )


def drop_namespace(settings: Settings) -> None:
    """Delete what :func:`index_corpus` created (tables, indices, template, vector store)."""
    os_index = factories.fulltext_index(settings)
    os_index.client.indices.delete(index=f"{settings.opensearch_index}-v*", ignore=[404])
    for version in range(1, MAPPING_VERSION + 1):
        os_index.client.indices.delete_index_template(
            name=f"{settings.opensearch_index}-messages-v{version}", ignore=[404]
        )
    ddb = aws.client(settings, "dynamodb")
    for table in (settings.table, settings.resolved_state_table):
        with suppress(ddb.exceptions.ResourceNotFoundException):
            ddb.delete_table(TableName=table)
    factories.vector_index(settings).close()
    shutil.rmtree(settings.qdrant_path, ignore_errors=True)


@contextmanager
def eval_namespace(base: Settings, workdir: Path, keep: bool = False) -> Iterator[Settings]:
    """A throwaway namespace for one evaluation, dropped afterwards unless ``keep``."""
    settings = eval_settings(base, workdir)
    try:
        yield settings
    finally:
        if not keep:
            drop_namespace(settings)
