"""The tailer's shards and their lineage: listing them, who may be read (a child only after
its parent is read to its end), reading a page, and what an error does to a shard.

DynamoDB orders records per item only within a shard lineage; shards are re-listed every
``discover_every_s`` so a split is followed promptly. Throttling and network errors back off
with jitter and never end the reader; an expired iterator is re-acquired from the checkpoint.
"""

from __future__ import annotations

import logging
from typing import Any

from indexer.adapters.aws.io import error_code
from indexer.adapters.dynamodb.state import ShardCheckpoint
from indexer.adapters.errors import classify
from indexer.core.errors import ErrorKind
from indexer.core.retry import backoff_seconds
from indexer.metrics import STREAM_LAG
from indexer.sources.tail.state import PAGE_LIMIT, Page, Shard, TailerState

log = logging.getLogger("indexer.sources.tail")



def is_transient(exc: BaseException) -> bool:
    """Throttling, 5xx and network errors of the stream (EndpointConnectionError,
    ReadTimeoutError, ...), and the broker's (a Redis restart while a page's results are
    awaited): the engines' own classification (``indexer.adapters.errors``)."""
    return classify(exc) is ErrorKind.TRANSIENT


class ShardReading(TailerState):
    """Shards and lineage: one page of a ready shard at a time."""

    def _discover(self, *, first: bool) -> None:
        now = self._opt.clock()
        try:
            listed = self._streams.shards(self._arn)
        except Exception as exc:  # never die: back off and re-list later
            self._discovery_attempt += 1
            log.warning("describe_stream failed (%s); backing off", exc)
            self._next_discovery = now + self._backoff(self._discovery_attempt)
            return
        self._discovery_attempt, self._fresh = 0, False
        self._next_discovery = now + self._opt.discover_every_s
        present = {s["ShardId"] for s in listed}
        for desc in listed:
            if desc["ShardId"] not in self._shards:
                self._shards[desc["ShardId"]] = self._new_shard(desc, first=first)
        for sid in (set(self._saved) | set(self._shards)) - present:
            shard = self._shards.pop(sid, None)
            ckpt = shard.checkpoint if shard else self._saved[sid]
            if not ckpt.done:
                self._gap(ckpt, "shard left the stream before it was read to its end")

    def _new_shard(self, desc: dict[str, Any], *, first: bool) -> Shard:
        sid = desc["ShardId"]
        saved = self._saved.get(sid, ShardCheckpoint(sid, None))
        shard = Shard(sid, desc.get("ParentShardId"), saved)
        if first and self._opt.start_at == "latest" and sid not in self._saved:
            closed = bool(desc.get("SequenceNumberRange", {}).get("EndingSequenceNumber"))
            shard.start = "LATEST"
            if closed:  # history before the start point: not ours to read
                shard.checkpoint = ShardCheckpoint(sid, None, done=True)
        return shard

    def _ready(self, shard: Shard) -> bool:
        return not self._blocked(shard) and shard.not_before <= self._opt.clock()

    def _blocked(self, shard: Shard) -> bool:
        """Not to be read whatever the time: finished, its last page in flight, or its
        parent not read to its end yet."""
        if shard.checkpoint.done or shard.read_all:
            return True
        parent = self._shards.get(shard.parent_id) if shard.parent_id else None
        return parent is not None and not parent.checkpoint.done

    def _read(self, shard: Shard) -> Page:
        if shard.iterator is None:
            shard.iterator = self._iterator(shard)
        if shard.iterator is None:
            return Page([], None)
        records, next_iterator = self._streams.records(shard.iterator, PAGE_LIMIT)
        return Page(records, next_iterator)

    def _iterator(self, shard: Shard) -> str | None:
        sid = shard.shard_id
        position = shard.position or shard.checkpoint.sequence
        if position and not shard.trimmed:
            return self._streams.iterator(self._arn, sid, "AFTER_SEQUENCE_NUMBER", position)
        kind = "TRIM_HORIZON" if shard.trimmed else shard.start
        return self._streams.iterator(self._arn, sid, kind, None)

    def _take_page(self, shard: Shard) -> bool:
        """Read the shard's next page unless one is pending; False when reading failed."""
        try:
            if shard.pending is None:
                shard.pending = self._read(shard)
        except Exception as exc:  # never die on one shard's trouble
            self._on_error(shard, exc)
            return False
        return True

    def _move_on(self, shard: Shard) -> tuple[Shard, Page]:
        """The shard's page is sent: read on from its end while its sweep is in flight."""
        page = shard.pending
        assert page is not None
        shard.pending, shard.attempt = None, 0
        shard.iterator = page.next_iterator
        shard.read_all = page.next_iterator is None
        if page.records:
            shard.position = page.records[-1]["dynamodb"]["SequenceNumber"]
        elif page.next_iterator:
            shard.not_before = self._opt.clock() + self._opt.idle_s
        return shard, Page(page.records[-1:], page.next_iterator, len(page.records))

    def _on_error(self, shard: Shard, exc: Exception) -> None:
        code = error_code(exc)
        STREAM_LAG.behind(shard.shard_id, self._opt.reader)
        if code == "ExpiredIteratorException":
            log.info("iterator of shard %s expired; re-acquiring from checkpoint", shard.shard_id)
            shard.iterator = None
            return
        if code == "TrimmedDataAccessException":
            self._gap(shard.checkpoint, "position already trimmed")
            shard.iterator, shard.trimmed = None, True
            return
        if is_transient(exc):
            log.warning("shard %s: %s; backing off", shard.shard_id, code or exc)
        else:
            log.error("shard %s: unexpected %r; backing off", shard.shard_id, exc, exc_info=exc)
            if shard.pending is None:
                shard.iterator = None
        shard.attempt += 1
        shard.not_before = self._opt.clock() + self._backoff(shard.attempt)

    def _backoff(self, attempt: int) -> float:
        base, cap = self._opt.backoff_base_s, self._opt.backoff_cap_s
        return backoff_seconds(max(0, attempt - 1), base=base, cap=cap)
