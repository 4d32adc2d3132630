"""Backfill the indexes from a DynamoDB export in S3 or from a parallel Scan of the table.

Both produce *trigger* records (see :mod:`indexer.sources.exports`): a record only names an
item, and the worker re-reads the message from the table. So a backfill may run while the live
stream is being ingested, from an export of any age: an old row can never overwrite a newer
change nor resurrect a deleted message — it just causes one more (idempotent) re-read.

Threads only read (S3 objects, Scan pages); one thread feeds Celery. Celery's Redis result
consumer is a single pub/sub connection per process and is not thread-safe, so sending and
waiting stay on the calling thread. Each data file / Scan page gets its own ``Ingestor``;
up to ``2 * parallel`` of them may be in flight, and they are waited for in FIFO order — so
when a unit is marked done in the sidecar's state table, it and every earlier unit of the same
segment are applied (or dead-lettered). A restarted backfill skips done units:

- export: ``PK=BACKFILL#<sha256(uri)>``, ``SK=<data file key>`` once all its batches are applied,
  and ``SK=people#<data file key>`` once the first pass synced its participant rows. An export
  is replayed in two passes (:mod:`indexer.core.replay`): participants first, in this process,
  then each message once per index through the workers;
- scan: ``PK=SCAN#<table>#<segments>``, ``SK=<segment>``, holding the segment's last applied
  ``LastEvaluatedKey`` (``lek``) or ``done``. Resuming needs the same number of segments.

``restart=True`` forgets the marks first. The Scan flavour lives in :mod:`indexer.sources.scan`.
"""

from __future__ import annotations

import base64
import hashlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from rich.progress import Progress, TaskID

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.objects import s3_bytes, s3_keys
from indexer.adapters.dynamodb.state import MarkStore
from indexer.core.export_window import ExportError
from indexer.core.records import RawRecord
from indexer.core.replay import ReplayFilter
from indexer.pipeline.dispatch import ingestor
from indexer.pipeline.ingest import Ingestor, Tally
from indexer.settings import Settings
from indexer.sources.exports import (
    DataFile,
    export_rows,
    parse_manifest_files,
    parse_summary,
    summary_keys,
)
from indexer.sources.people_pass import PeoplePass

PEOPLE_MARK = "people#"  # SK prefix: a data file's (or segment's) participant pass is done
@dataclass
class BackfillSummary(Tally):
    """Totals of one run; ``units`` are data files or scan segments, ``skipped`` were done;
    ``deduplicated`` rows named a message already synced in this run (not sent again)."""

    units: int = 0
    skipped: int = 0
    deduplicated: int = 0


class Window:
    """Ingestors in flight, waited for oldest first; ``on_done`` runs after each is applied."""

    def __init__(self, size: int, timeout_s: float, summary: BackfillSummary) -> None:
        self._size, self._timeout, self._summary = size, timeout_s, summary
        self._queue: deque[tuple[Ingestor, Callable[[], None]]] = deque()

    def push(self, run: Ingestor, on_done: Callable[[], None]) -> None:
        run.flush()
        self._queue.append((run, on_done))
        while len(self._queue) > self._size:
            self._pop()

    def drain(self) -> None:
        while self._queue:
            self._pop()

    def _pop(self) -> None:
        run, on_done = self._queue.popleft()
        self._summary.add(run.wait(self._timeout))
        on_done()


def progress_task(progress: Progress | None, name: str, total: float | None) -> TaskID | None:
    return progress.add_task(name, total=total) if progress is not None else None


def advance(progress: Progress | None, task: TaskID | None, n: int) -> None:
    if progress is not None and task is not None:
        progress.advance(task, n)


def feed(settings: Settings, records: Iterator[RawRecord] | list[RawRecord]) -> Ingestor:
    """An ingestor fed a unit's triggers: a replay (first reads eventually consistent)."""
    run = ingestor(settings, replay=True)
    for record in records:
        run.feed(record)
    return run


def state_client(settings: Settings) -> Any:
    return aws.client(settings, "dynamodb")


# -- export ------------------------------------------------------------------------------------
def _split(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://"):
        raise ExportError(f"an export is read from s3://bucket/prefix, not {uri!r}")
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix


def export_files(s3: Any, uri: str) -> list[tuple[DataFile, bool]]:
    """Every data file of every export under ``uri`` (with its incremental flag).

    Several exports under one prefix (a full one and incrementals) are all replayed: records
    are triggers, so their order does not matter.
    """
    bucket, prefix = _split(uri)
    found = summary_keys(s3_keys(s3, bucket, prefix))
    if not found:
        raise ExportError(f"no manifest-summary.json under {uri}")
    files: list[tuple[DataFile, bool]] = []
    for key in found:
        manifest = parse_summary(s3_bytes(s3, bucket, key), key)
        body = s3_bytes(s3, bucket, manifest.manifest_files_key)
        for data_file in parse_manifest_files(body, manifest.manifest_files_key):
            files.append((data_file, manifest.incremental))
    return files


def _read_file(s3: Any, bucket: str, data_file: DataFile, incremental: bool) -> list[RawRecord]:
    data = s3_bytes(s3, bucket, data_file.key)
    if data_file.md5:
        digest = base64.b64encode(hashlib.md5(data).digest()).decode()  # noqa: S324 - checksum
        if digest != data_file.md5:
            raise ExportError(f"s3://{bucket}/{data_file.key}: md5 does not match the manifest")
    return list(export_rows(data, f"s3://{bucket}/{data_file.key}", incremental=incremental))


def export_checkpoint_pk(uri: str) -> str:
    return "BACKFILL#" + hashlib.sha256(uri.rstrip("/").encode()).hexdigest()


def backfill_export(
    settings: Settings,
    uri: str,
    *,
    parallel: int = 4,
    restart: bool = False,
    progress: Progress | None = None,
    timeout_s: float = 3600.0,
) -> BackfillSummary:
    """Replay the export(s) under ``uri`` in two passes (see :mod:`indexer.core.replay`):
    participants first, then each message once per index; resumable per data file and pass."""
    s3 = aws.client(settings, "s3")
    bucket, _ = _split(uri)
    files = export_files(s3, uri)
    marks = MarkStore(
        state_client(settings), settings.resolved_state_table, export_checkpoint_pk(uri)
    )
    if restart:
        marks.clear()
    state = set(marks.load())
    done = {k for k in state if not k.startswith(PEOPLE_MARK)}
    todo = [(f, inc) for f, inc in files if f.key not in done]
    summary = BackfillSummary(units=len(files), skipped=len(files) - len(todo))
    people_todo = [(f, inc) for f, inc in todo if PEOPLE_MARK + f.key not in state]
    people_task = progress_task(progress, "participants", len(people_todo))
    people = PeoplePass(factories.store(settings), settings.batch_messages)
    for data_file, rows in _read_files(s3, bucket, people_todo, parallel):
        people.add(rows, partial(marks.put, PEOPLE_MARK + data_file.key, {"done": {"BOOL": True}}))
        advance(progress, people_task, 1)
    people.flush()
    replay = ReplayFilter(unsynced=people.unsynced)
    file_task = progress_task(progress, "files", len(todo))
    item_task = progress_task(progress, "items", sum(f.item_count for f, _ in todo))
    window = Window(2 * parallel, timeout_s, summary)
    for data_file, rows in _read_files(s3, bucket, todo, parallel):
        admitted = [row if row.error is not None else RawRecord(row.source, trigger)
                    for row in rows
                    if row.error is not None or (trigger := replay.trigger(row.raw)) is not None]
        skipped = len(rows) - len(admitted)  # counted read here; the ingest counts the rest
        summary.read += skipped
        summary.deduplicated += skipped
        run = feed(settings, admitted)
        advance(progress, item_task, len(rows))

        def finished(key: str = data_file.key) -> None:
            marks.put(key, {"done": {"BOOL": True}})
            advance(progress, file_task, 1)

        window.push(run, finished)
    window.drain()
    return summary


def _read_files(
    s3: Any, bucket: str, files: list[tuple[DataFile, bool]], parallel: int
) -> Iterator[tuple[DataFile, list[RawRecord]]]:
    """Each file's rows in order, ``parallel`` files read ahead in threads."""
    with ThreadPoolExecutor(max(1, parallel), thread_name_prefix="backfill") as pool:
        pending = iter(files)
        reads: deque[tuple[DataFile, Future[list[RawRecord]]]] = deque()

        def prefetch() -> None:
            for data_file, incremental in pending:
                reads.append((data_file, pool.submit(_read_file, s3, bucket, data_file,
                                                     incremental)))
                return

        for _ in range(max(1, parallel)):
            prefetch()
        while reads:
            data_file, future = reads.popleft()
            rows = future.result()
            prefetch()
            yield data_file, rows
