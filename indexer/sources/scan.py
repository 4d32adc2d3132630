"""Backfill from a parallel ``Scan`` of the mail table, for tables without exports.

Same guarantees as an export backfill (:mod:`indexer.sources.backfill`): scanned keys become
trigger records, so a Scan may run beside the live tail, and the table is replayed as an export
is, in two passes (participants first, then each message once per index). Segments are read in
threads (rate-limited over all of them, keys only), pages are handled on the calling thread,
and each segment's last applied ``LastEvaluatedKey`` is marked in the sidecar's table
(``PK=SCAN#<table>#<segments>``, ``SK=people#<segment>`` for the first pass and
``SK=<segment>`` for the second; ``done`` at its end) so a restart resumes.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from rich.progress import Progress

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.aws.io import pages
from indexer.adapters.dynamodb.state import MarkStore
from indexer.core.errors import RecordError
from indexer.core.records import RawRecord
from indexer.core.replay import ReplayFilter
from indexer.settings import Settings
from indexer.sources.backfill import (
    PEOPLE_MARK,
    BackfillSummary,
    Window,
    advance,
    feed,
    progress_task,
    state_client,
)
from indexer.sources.exports import item_trigger
from indexer.sources.people_pass import PeoplePass


class RateLimiter:
    """At most ``rate`` items per second over all threads (``None``: unlimited)."""

    def __init__(self, rate: float | None) -> None:
        self._rate, self._next, self._lock = rate, time.monotonic(), threading.Lock()

    def take(self, n: int) -> None:
        if not self._rate or n <= 0:
            return
        with self._lock:
            now = time.monotonic()
            start = max(self._next, now)
            self._next = start + n / self._rate
        time.sleep(max(0.0, start - now))


_Page = tuple[int, list[dict[str, Any]], dict[str, Any] | None]


def _scan_segment(
    ddb: Any, settings: Settings, segment: int, total: int, start: dict[str, Any] | None,
    limiter: RateLimiter, out: queue.Queue[_Page | tuple[int, BaseException]],
    stop: threading.Event, page_size: int,
) -> None:
    """Scan one segment (keys only: a trigger needs nothing else), pushing pages to ``out``."""
    args: dict[str, Any] = {
        "TableName": settings.table, "Segment": segment, "TotalSegments": total,
        "ProjectionExpression": "PK, SK", "Limit": page_size,
    }
    if start:
        args["ExclusiveStartKey"] = start
    try:
        for page in pages(ddb, "scan", **args):
            lek = page.get("LastEvaluatedKey")
            while not stop.is_set():
                try:
                    out.put((segment, page.get("Items", []), lek), timeout=0.5)
                    break
                except queue.Full:
                    continue
            if stop.is_set():
                return
            limiter.take(len(page.get("Items", [])))
    except BaseException as exc:  # handed to the feeding thread, which re-raises it
        out.put((segment, exc))


def _scan_records(segment: int, items: list[dict[str, Any]]) -> Iterator[RawRecord]:
    for i, item in enumerate(items):
        where = f"scan:segment={segment}#{i}"
        try:
            yield RawRecord(where, item_trigger(item))
        except RecordError as exc:
            yield RawRecord(where, item, exc)


@dataclass
class _Pass:
    """What one Scan of the table does with each page, and once every segment is read."""

    on_page: Callable[[int, list[RawRecord], dict[str, Any] | None], None]
    finish: Callable[[], None]


def _starts(state: dict[str, dict[str, Any]], prefix: str, segments: int
            ) -> dict[int, dict[str, Any] | None]:
    """Where each unfinished segment of a pass resumes (None: at its start)."""
    starts: dict[int, dict[str, Any] | None] = {}
    for segment in range(segments):
        mark = state.get(f"{prefix}{segment:05d}", {})
        if not mark.get("done", {}).get("BOOL"):
            starts[segment] = json.loads(mark["lek"]["S"]) if "lek" in mark else None
    return starts


def _mark(lek: dict[str, Any] | None) -> dict[str, Any]:
    return {"lek": {"S": json.dumps(lek)}} if lek else {"done": {"BOOL": True}}


def _run_pass(ddb: Any, settings: Settings, segments: int, starts: dict[int, dict[str, Any] | None],
              scan: _Pass, limiter: RateLimiter, page_size: int) -> None:
    """Scan the unfinished segments in threads; pages are handled on this thread."""
    out: queue.Queue[_Page | tuple[int, BaseException]] = queue.Queue(maxsize=2 * segments)
    stop = threading.Event()
    with ThreadPoolExecutor(max(1, len(starts)), thread_name_prefix="scan") as pool:
        for segment, start in starts.items():
            pool.submit(
                _scan_segment, ddb, settings, segment, segments, start, limiter, out, stop,
                page_size,
            )
        active = len(starts)
        try:
            while active:
                entry = out.get()
                if len(entry) == 2:
                    raise entry[1]
                segment, items, lek = entry
                active -= lek is None
                scan.on_page(segment, list(_scan_records(segment, items)), lek)
            scan.finish()
        finally:
            stop.set()


def backfill_scan(
    settings: Settings,
    *,
    segments: int = 4,
    rate_limit: float | None = None,
    restart: bool = False,
    progress: Progress | None = None,
    page_size: int = 500,
    timeout_s: float = 3600.0,
) -> BackfillSummary:
    """Parallel Scan (``TotalSegments``) of the mail table in two passes, as an export is
    replayed (:mod:`indexer.core.replay`): participants first, into the participant store in
    this process, then each message once per index through the workers. Resumable per
    segment and page of each pass.

    Why a second Scan: a message's participant items are keyed by address and lie anywhere
    in the table, so in one pass most messages would be synced again for a participant read
    after them (7.3 full-text syncs per message before, issue 28). The second Scan costs what
    the first does (keys only, but DynamoDB bills the items' full size, eventually
    consistent); each message is then synced once per index.
    """
    ddb = aws.client(settings, "dynamodb")
    marks = MarkStore(
        state_client(settings), settings.resolved_state_table, f"SCAN#{settings.table}#{segments}"
    )
    if restart:
        marks.clear()
    state = marks.load()
    people_starts = _starts(state, PEOPLE_MARK, segments)
    starts = _starts(state, "", segments)
    summary = BackfillSummary(units=segments, skipped=segments - len(starts))
    total = ddb.describe_table(TableName=settings.table)["Table"].get("ItemCount")
    limiter = RateLimiter(rate_limit)
    people = PeoplePass(factories.store(settings), settings.batch_messages)
    if starts and people_starts:
        people_task = progress_task(progress, "participants", float(total) if total else None)

        def people_page(segment: int, rows: list[RawRecord], lek: dict[str, Any] | None) -> None:
            people.add(rows, partial(marks.put, f"{PEOPLE_MARK}{segment:05d}", _mark(lek)))
            advance(progress, people_task, len(rows))

        _run_pass(ddb, settings, segments, people_starts,
                  _Pass(people_page, people.flush), limiter, page_size)
    item_task = progress_task(progress, "items", float(total) if total else None)
    window = Window(2 * segments, timeout_s, summary)
    replay = ReplayFilter(unsynced=people.unsynced)

    def message_page(segment: int, rows: list[RawRecord], lek: dict[str, Any] | None) -> None:
        admitted = [row if row.error is not None else RawRecord(row.source, trigger)
                    for row in rows
                    if row.error is not None or (trigger := replay.trigger(row.raw)) is not None]
        summary.read += len(rows) - len(admitted)  # the ingest counts the rest
        summary.deduplicated += len(rows) - len(admitted)
        advance(progress, item_task, len(rows))
        window.push(feed(settings, admitted), partial(marks.put, f"{segment:05d}", _mark(lek)))

    _run_pass(ddb, settings, segments, starts, _Pass(message_page, window.drain),
              limiter, page_size)
    return summary
