"""Import a mail folder or file: parse, store with the store writer, index in this process.

Storing goes through :func:`sidecar_tools.writer.store.store_message` (one transaction per
message, as ``sidecar load``), so the table, its stream and its thread summaries are exactly
what the writer produces. Indexing then runs the pipeline's own read-write-verify sync
(:func:`indexer.pipeline.sync.sync_fulltext`, :func:`indexer.pipeline.vector_sync.
sync_vector_targets`) on each batch — the code a Celery task runs — so no worker is needed and
the embedded Qdrant store works (this process owns it while it runs). Already-stored messages
are synced too: a re-run after an interruption completes the indexes and embeds nothing twice
(content hashes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from indexer.core.plan import MessageRef, ParticipantRef
from indexer.core.task_payload import TaskPayload
from indexer.pipeline.contacts_sync import Recount, fulltext_sink, keeper, merged, recount
from indexer.settings import Settings
from sidecar_tools.mailimport.convert import MalformedMessage, to_normalized
from sidecar_tools.mailimport.sources import Source, messages, open_source
from sidecar_tools.writer.mapping import MessageItems, to_items
from sidecar_tools.writer.parse import InvalidEmail, validate_mailbox_id
from sidecar_tools.writer.store import create_table, store_message


@dataclass(frozen=True, slots=True)
class Skipped:
    origin: str  # file, or mbox#N
    reason: str


@dataclass
class ImportSummary:
    """Counts of one import; ``skipped`` names each malformed message and why."""

    source: str
    kind: str
    files: int
    stored: int = 0
    already_present: int = 0
    indexed: int = 0
    embedded: int = 0
    not_indexed: dict[str, str] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    seconds: float = 0.0


# (messages read, messages in the source, files done): the CLI's progress bar
Progress = Callable[[int, int, int], None]


class _Indexer:
    """Batches of stored messages, synced into both indexes as a task would."""

    def __init__(self, settings: Settings, summary: ImportSummary) -> None:
        from indexer.adapters import factories

        self.settings, self.summary = settings, summary
        self.store, self.fulltext = factories.store(settings), factories.fulltext_index(settings)
        self.refs: list[MessageRef] = []
        self.participants: list[ParticipantRef] = []
        self.recounts: list[Recount] = []  # the contacts each batch moved, recounted at close

    def add(self, items: MessageItems, mailbox: str) -> None:
        ref = MessageRef(mailbox, items.message_key)
        self.refs.append(ref)
        self.participants += [ParticipantRef(ref, p["PK"], p["SK"]) for p in items.participants]
        if len(self.refs) >= self.settings.batch_messages:
            self.flush()

    def flush(self) -> None:
        from indexer.pipeline.sync import sync_fulltext
        from indexer.pipeline.vector_sync import sync_vector_targets

        if not self.refs:
            return
        text = sync_fulltext(self.store, fulltext_sink(self.settings, self.recounts.append),
                             self.refs,
                             self.participants)
        vectors = sync_vector_targets(self.settings, self.refs)
        poison = {**text.poison, **vectors.poison}
        self.summary.indexed += len((text.applied & vectors.applied) - poison.keys())
        self.summary.embedded += vectors.embedded
        self.summary.not_indexed.update({r.message_key: why for r, why in poison.items()})
        self._dead_letter(text.poison, "fulltext")
        self._dead_letter(vectors.poison, "vectors")
        self.refs, self.participants = [], []

    def _dead_letter(self, poison: dict[MessageRef, str], stage: str) -> None:
        from indexer.adapters import factories

        for ref, reason in poison.items():
            factories.dead_letters(self.settings).add(
                stage=stage, reason=reason, mailbox_id=ref.mailbox_id,
                payload=TaskPayload.of([ref]).to_json(),
            )

    def close(self) -> None:
        from indexer.adapters import factories

        self.flush()
        self.fulltext.refresh()
        if self.recounts:  # each mailbox's contacts once, now that every batch is searchable
            recount(keeper(self.settings), merged(self.recounts))
        factories.vector_index(self.settings).close()  # release the embedded store's lock
        factories.vector_index.cache_clear()


def _store_one(
    ddb: Any, table: str, raw: bytes, mailbox: str, now: str
) -> tuple[MessageItems, bool]:
    """Parse and store one message: (its items, newly stored); raises for a bad message."""
    email = to_normalized(raw, now)
    items = to_items(email, mailbox)
    try:
        return items, store_message(ddb, table, items)
    except ClientError as err:
        if err.response["Error"]["Code"] != "ValidationException":
            raise
        raise InvalidEmail(f"DynamoDB refused it: {err}") from None


def import_path(
    settings: Settings, path: Path, mailbox: str, *, index: bool = True,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import every message under ``path`` into ``mailbox``; malformed ones are skipped.

    Raises :class:`~sidecar_tools.writer.parse.InvalidEmail` for a bad mailbox id and
    :class:`~sidecar_tools.mailimport.sources.UnknownSource` / OSError for a bad ``path``.
    """
    from indexer.adapters.aws import clients as aws

    started = time.monotonic()
    validate_mailbox_id(mailbox)
    source: Source = open_source(Path(path))
    summary = ImportSummary(str(path), source.kind, len(source.files))
    ddb = aws.client(settings, "dynamodb")
    create_table(ddb, settings.table)
    indexer: _Indexer | None = None
    if index:
        from indexer.adapters.dynamodb.tables import init_tables

        init_tables(ddb, settings)  # the sidecar's own table, as `sidecar init` makes it
        indexer = _Indexer(settings, summary)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        for n, (origin, raw) in enumerate(messages(source), start=1):
            _one(ddb, settings, origin, raw, mailbox, now, summary, indexer)
            if progress:
                files = n if source.kind != "mbox" else int(n == source.messages)
                progress(n, source.messages, files)
    finally:
        if indexer is not None:
            indexer.close()
    summary.seconds = time.monotonic() - started
    return summary


def _one(
    ddb: Any, settings: Settings, origin: str, raw: bytes | OSError, mailbox: str, now: str,
    summary: ImportSummary, indexer: _Indexer | None,
) -> None:
    if isinstance(raw, OSError):
        summary.skipped.append(Skipped(origin, f"unreadable: {raw}"))
        return
    try:
        items, new = _store_one(ddb, settings.table, raw, mailbox, now)
    except (MalformedMessage, InvalidEmail) as err:
        summary.skipped.append(Skipped(origin, str(err)))
        return
    summary.stored += new
    summary.already_present += not new
    if indexer is not None:
        indexer.add(items, mailbox)
