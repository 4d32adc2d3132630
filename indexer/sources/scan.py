"""Backfill from a parallel ``Scan`` of the mail table, for tables without exports.

Same guarantees as an export backfill (:mod:`indexer.sources.backfill`): scanned keys become
trigger records, so a Scan may run beside the live tail. Segments are read in threads
(rate-limited over all of them, keys only), pages are fed on the calling thread, and each
segment's last applied ``LastEvaluatedKey`` is marked in the sidecar's table
(``PK=SCAN#<table>#<segments>``, ``SK=<segment>``; ``done`` at its end) so a restart resumes.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rich.progress import Progress

from indexer.adapters import aws
from indexer.adapters.dynamo_io import pages
from indexer.adapters.state import MarkStore
from indexer.core.errors import RecordError
from indexer.core.records import RawRecord
from indexer.settings import Settings
from indexer.sources.backfill import (
    BackfillSummary,
    Window,
    advance,
    feed,
    progress_task,
    state_client,
)
from indexer.sources.exports import item_trigger


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
    """Parallel Scan (``TotalSegments``) of the mail table; resumable per segment and page."""
    ddb = aws.client(settings, "dynamodb")
    marks = MarkStore(
        state_client(settings), settings.resolved_state_table, f"SCAN#{settings.table}#{segments}"
    )
    if restart:
        marks.clear()
    state = marks.load()
    starts: dict[int, dict[str, Any] | None] = {}
    for segment in range(segments):
        mark = state.get(f"{segment:05d}", {})
        if not mark.get("done", {}).get("BOOL"):
            starts[segment] = json.loads(mark["lek"]["S"]) if "lek" in mark else None
    summary = BackfillSummary(units=segments, skipped=segments - len(starts))
    total = ddb.describe_table(TableName=settings.table)["Table"].get("ItemCount")
    item_task = progress_task(progress, "items", float(total) if total else None)
    window = Window(2 * segments, timeout_s, summary)
    out: queue.Queue[_Page | tuple[int, BaseException]] = queue.Queue(maxsize=2 * segments)
    stop, limiter = threading.Event(), RateLimiter(rate_limit)
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
                run = feed(settings, _scan_records(segment, items))
                advance(progress, item_task, len(items))
                mark = {"lek": {"S": json.dumps(lek)}} if lek else {"done": {"BOOL": True}}

                def checkpoint(sk: str = f"{segment:05d}", m: dict[str, Any] = mark) -> None:
                    marks.put(sk, m)

                window.push(run, checkpoint)
            window.drain()
        finally:
            stop.set()
    return summary
