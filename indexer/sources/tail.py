"""``sidecar tail``: follow the mail table's DynamoDB stream into the pipeline, for ever.

Why it is shaped this way:
- A shard's checkpoint advances only after the page's tasks are applied in both indexes
  (design invariant 3); a crash re-reads at most one page per shard, which is harmless because
  records are only triggers. One page at a time per shard keeps that simple.
- The pages of one sweep over the shards are applied as one set, grouped by message: a
  message's items sit under several partition keys and reach several shards, and applied
  shard by shard it was synced once per shard (issue 28).
- DynamoDB orders records per item only *within a shard lineage*: a child shard is read only
  once its parent is done, and shards are re-listed every second or so, so a split is followed
  promptly.
- Throttling and network errors are retried with jittered backoff and never end the reader;
  an expired iterator is re-acquired from the checkpoint.
- Records that expired (24 h retention) before being read cannot be recovered from the stream:
  that is reported loudly as a *gap* (log, ``gaps``, a counter, the exit status) pointing to
  ``sidecar backfill``, never skipped silently.
- Only the holder of the table's lease reads, so a standby can run beside it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from indexer.adapters.aws.io import error_code
from indexer.adapters.aws.streams import StreamReader, portable
from indexer.adapters.dynamodb.state import Lease, ShardCheckpoint
from indexer.adapters.errors import classify
from indexer.core.errors import ErrorKind
from indexer.core.export_window import gap_command
from indexer.core.records import RawRecord
from indexer.core.retry import backoff_seconds
from indexer.metrics import GAPS, STREAM_LAG

log = logging.getLogger(__name__)

PAGE_LIMIT = 1000
StartAt = Literal["trim_horizon", "latest"]


class Sink(Protocol):
    """What a sweep is fed into: :class:`indexer.pipeline.ingest.Ingestor`."""

    def feed_together(self, items: list[RawRecord]) -> None: ...
    def wait(self, timeout_s: float = ...) -> Any: ...
    def done(self) -> bool: ...
    def batches(self) -> int: ...


class ShardPositions(Protocol):
    """Where shard positions live: :class:`indexer.adapters.dynamodb.state.ShardCheckpointStore`."""

    def load(self) -> dict[str, ShardCheckpoint]: ...
    def save(self, checkpoint: ShardCheckpoint) -> None: ...


@dataclass(frozen=True, slots=True)
class Gap:
    """Records of ``shard_id`` after ``sequence`` (None: from its start) were never read;
    ``since`` is when the last applied record was written (None: unknown), ``seen`` when the
    gap was found (epoch seconds): the window the repair export covers."""

    shard_id: str
    sequence: str | None
    reason: str
    since: int | None = None
    seen: int = 0

    @property
    def repair(self) -> str:
        """The one command that replays the gap (an incremental export of its window)."""
        return gap_command(self.since, self.seen)


@dataclass(slots=True)
class _Page:
    records: list[dict[str, Any]]
    next_iterator: str | None
    count: int = -1  # records read; -1: len(records) (a page in flight keeps only its last)

    def size(self) -> int:
        return len(self.records) if self.count < 0 else self.count


@dataclass(slots=True)
class _Sweep:
    """Pages applied together and in flight until their last tasks (vectors) answer; the
    sink is None for a sweep of empty pages (nothing to wait for, only positions)."""

    sink: Sink | None
    pages: list[tuple[_Shard, _Page]]
    sent_at: float = 0.0


@dataclass(slots=True)
class _Shard:
    shard_id: str
    parent_id: str | None
    checkpoint: ShardCheckpoint
    start: str = "TRIM_HORIZON"  # used only without a checkpoint
    iterator: str | None = None
    pending: _Page | None = None  # read but not yet applied: retried as is, never re-read
    position: str | None = None  # last sequence read (ahead of the checkpoint while in flight)
    read_all: bool = False  # its last page is in flight: nothing more to read
    attempt: int = 0
    not_before: float = 0.0
    trimmed: bool = False  # the checkpointed position expired: go on from the oldest record


def is_transient(exc: BaseException) -> bool:
    """Throttling, 5xx and network errors of the stream (EndpointConnectionError,
    ReadTimeoutError, ...), and the broker's (a Redis restart while a page's results are
    awaited): the engines' own classification (``indexer.adapters.errors``)."""
    return classify(exc) is ErrorKind.TRANSIENT


@dataclass
class TailOptions:
    start_at: StartAt = "trim_horizon"
    discover_every_s: float = 1.0
    # A shard whose last page was empty is read again ``idle_s`` later: with the sweep gap,
    # a shard is read at most 4 times a second, as a Lambda event-source mapping polls it
    # (``sidecar tail`` doubles both for a reader of one stage: two readers share a shard).
    idle_s: float = 0.25
    apply_timeout_s: float = 900.0
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0
    renew_every_s: float = 3.0
    reader: str = "all"  # which stage(s) this reader applies: labels its lag metric
    # Records sent and not yet answered in both indexes while the next sweeps are read
    # (design invariant 5: full text never waits behind embedding); past it, the tailer waits
    # for the oldest sweep, so the queues hold about one page of records (a larger sweep is
    # sent whole). 0: each sweep applied before the next is read. Counted in records, not
    # batches: at a trickle each sweep is a batch of one or two messages.
    in_flight: int = PAGE_LIMIT
    # ... and batches: at most about one page of batches in the queues however small the
    # sweeps (``sidecar tail`` sets PAGE_LIMIT // SIDECAR_BATCH_MESSAGES + 1).
    in_flight_batches: int = PAGE_LIMIT // 64 + 1
    # After a sweep is sent, the next is read ``sweep_gap_s`` later at the earliest: records
    # arriving meanwhile make one batch instead of a queue of small tasks, each waiting for
    # the one before (and a shard is read at most 4 times a second, as Lambda polls it).
    sweep_gap_s: float = 0.25
    clock: Callable[[], float] = field(default=time.monotonic)


class StreamTailer:
    """Reads one stream; ``poll_once`` is one step (tests), ``run`` the loop (the command)."""

    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        checkpoints: ShardPositions,
        sink_factory: Callable[[], Sink],
        lease: Lease | None = None,
        options: TailOptions | None = None,
    ) -> None:
        self._streams = StreamReader(streams)
        self._arn = stream_arn
        self._store = checkpoints
        self._sink_factory = sink_factory
        self._lease = lease
        self._opt = options or TailOptions()
        self.gaps: list[Gap] = []
        self.applied = 0
        self._reported: set[str] = set()
        self._fresh = True  # `start_at=latest` applies to the shards of the first listing only
        self._reset()

    def _reset(self) -> None:
        """Forget in-memory positions; the next step reloads them from the checkpoints."""
        self._loaded = False
        self._shards: dict[str, _Shard] = {}
        self._saved: dict[str, ShardCheckpoint] = {}
        self._next_discovery = 0.0
        self._discovery_attempt = 0
        self._generation = self._lease.generation if self._lease else 0
        self._flight: deque[_Sweep] = deque()

    # -- one step ---------------------------------------------------------------------------
    def poll_once(self) -> int:
        """Re-list shards when due, read one page of every ready shard, send the sweep's
        pages together (one sink), and commit, oldest first, the sweeps whose tasks have all
        answered. Returns the records read in this step.

        Why together: a message's items sit under several partition keys, so its records
        reach several shards; applied shard by shard, it was synced and its PEOPLE item
        written once per shard (issue 28: 5 times over 8 shards). Why without waiting: the
        next sweep is read while this one's tasks run (at most ``in_flight`` records), so new
        mail's full text never waits behind an earlier sweep's embedding (it waited 87 % of
        its latency, docs/results/runs/); a shard's checkpoint still moves only once both
        indexes applied its page. A sweep that cannot be sent keeps every page pending and
        retries them as they are.
        """
        if not self._loaded:
            try:
                self._saved = self._store.load()
            except Exception as exc:
                if not (is_transient(exc) or error_code(exc)):
                    raise
                log.warning("cannot load checkpoints (%s); retrying", exc)
                return 0
            self._loaded = True
        if self._opt.clock() >= self._next_discovery:
            self._discover(first=self._fresh)
        if self.coalescing():
            self._settle()
            return 0
        swept = [shard for shard in list(self._shards.values())
                 if self._ready(shard) and self._take_page(shard)]
        read = 0
        if swept:
            try:
                sink = self._apply(swept)
            except Exception as exc:  # every page stays pending: retried as is
                for shard in swept:
                    self._on_error(shard, exc)
                return 0
            read = sum(len(shard.pending.records) for shard in swept if shard.pending)
            pages = [self._move_on(shard) for shard in swept]
            if read or any(page.next_iterator is None for _, page in pages):
                self._flight.append(_Sweep(sink, pages, self._opt.clock()))
            elif not self._flight:  # empty pages of open shards: no position to commit
                for shard, page in pages:
                    self._observe_lag(shard.shard_id, page)
        self._settle()
        return read

    def coalescing(self) -> bool:
        """Whether the next sweep waits: for ``sweep_gap_s`` after the newest one was sent.
        What arrives meanwhile goes out as one batch, so tasks grow with the write rate
        instead of queueing one message each behind the one before. Only the clock decides:
        asking the broker whether tasks answered, many times a second, is what a broker
        outage must not hang on."""
        return self._gap_left() > 0

    def _gap_left(self) -> float:
        newest = self._flight[-1] if self._flight else None
        if newest is None or newest.sink is None:
            return 0.0
        return max(0.0, newest.sent_at + self._opt.sweep_gap_s - self._opt.clock())

    def pause(self) -> float:
        """How long an idle loop sleeps: until the sweep gap ends, else until the first shard
        is due again (``idle_s`` at most), so a record written just after an empty read waits
        ``idle_s``, not ``idle_s`` plus a loop tick. Never under 10 ms."""
        gap = self._gap_left()
        if gap > 0:
            return gap
        now = self._opt.clock()
        due = [shard.not_before - now for shard in self._shards.values()
               if not self._blocked(shard)]
        return max(0.01, min([self._opt.idle_s, *due]))

    def _take_page(self, shard: _Shard) -> bool:
        """Read the shard's next page unless one is pending; False when reading failed."""
        try:
            if shard.pending is None:
                shard.pending = self._read(shard)
        except Exception as exc:  # never die on one shard's trouble
            self._on_error(shard, exc)
            return False
        return True

    def _move_on(self, shard: _Shard) -> tuple[_Shard, _Page]:
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
        return shard, _Page(page.records[-1:], page.next_iterator, len(page.records))

    def _settle(self, *, drain: bool = False) -> None:
        """Commit, oldest first, every sweep whose tasks have all answered, waiting for the
        oldest while more than ``in_flight`` records or ``in_flight_batches`` batches are in
        flight (``drain``: for every sweep). A sweep that fails now (a vectors
        task's error, the broker lost) sends the tailer back to its checkpoints: the sweeps
        after it were read on from positions not yet committed."""
        while self._flight:
            sweep = self._flight[0]
            records = sum(page.size() for s in self._flight for _, page in s.pages)
            batches = sum(s.sink.batches() for s in self._flight if s.sink is not None)
            within = (not drain and records <= self._opt.in_flight
                      and batches <= self._opt.in_flight_batches)
            if within and sweep.sink is not None and not sweep.sink.done():
                return
            try:
                if sweep.sink is not None:
                    sweep.sink.wait(self._opt.apply_timeout_s)
                if self._lease is not None and not self._lease.held:
                    self._reset()  # the new holder re-reads from the checkpoints
                    return
                for shard, page in sweep.pages:
                    self._commit(shard, page)
            except Exception as exc:
                log.warning("a sweep in flight failed (%s); re-reading from the checkpoints",
                            exc)
                self._reset()
                self._next_discovery = self._opt.clock() + self._backoff(1)
                return
            self._flight.popleft()
            self.applied += sum(page.size() for _, page in sweep.pages)

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

    def _new_shard(self, desc: dict[str, Any], *, first: bool) -> _Shard:
        sid = desc["ShardId"]
        saved = self._saved.get(sid, ShardCheckpoint(sid, None))
        shard = _Shard(sid, desc.get("ParentShardId"), saved)
        if first and self._opt.start_at == "latest" and sid not in self._saved:
            closed = bool(desc.get("SequenceNumberRange", {}).get("EndingSequenceNumber"))
            shard.start = "LATEST"
            if closed:  # history before the start point: not ours to read
                shard.checkpoint = ShardCheckpoint(sid, None, done=True)
        return shard

    def _ready(self, shard: _Shard) -> bool:
        return not self._blocked(shard) and shard.not_before <= self._opt.clock()

    def _blocked(self, shard: _Shard) -> bool:
        """Not to be read whatever the time: finished, its last page in flight, or its
        parent not read to its end yet."""
        if shard.checkpoint.done or shard.read_all:
            return True
        parent = self._shards.get(shard.parent_id) if shard.parent_id else None
        return parent is not None and not parent.checkpoint.done

    def _read(self, shard: _Shard) -> _Page:
        if shard.iterator is None:
            shard.iterator = self._iterator(shard)
        if shard.iterator is None:
            return _Page([], None)
        records, next_iterator = self._streams.records(shard.iterator, PAGE_LIMIT)
        return _Page(records, next_iterator)

    def _iterator(self, shard: _Shard) -> str | None:
        sid = shard.shard_id
        position = shard.position or shard.checkpoint.sequence
        if position and not shard.trimmed:
            return self._streams.iterator(self._arn, sid, "AFTER_SEQUENCE_NUMBER", position)
        kind = "TRIM_HORIZON" if shard.trimmed else shard.start
        return self._streams.iterator(self._arn, sid, kind, None)

    def _apply(self, shards: list[_Shard]) -> Sink | None:
        """Send the sweep's pages to the pipeline as one set; its sink (None when the pages
        held no record) is waited for later, in :meth:`_settle`."""
        records = [
            RawRecord(f"stream:{shard.shard_id}:{record['dynamodb']['SequenceNumber']}",
                      portable(record))
            for shard in shards if shard.pending is not None
            for record in shard.pending.records
        ]
        if not records:
            return None
        sink = self._sink_factory()
        sink.feed_together(records)
        return sink

    def _commit(self, shard: _Shard, page: _Page) -> None:
        last = page.records[-1]["dynamodb"]["SequenceNumber"] if page.records else None
        created = (
            portable(page.records[-1])["dynamodb"].get("ApproximateCreationDateTime")
            if page.records
            else None
        )
        new = ShardCheckpoint(
            shard.shard_id,
            last or shard.checkpoint.sequence,
            done=page.next_iterator is None,
            created=int(created) if created is not None else shard.checkpoint.created,
        )
        if new != shard.checkpoint:
            self._store.save(new)
            shard.checkpoint = self._saved[shard.shard_id] = new
        if last is not None:
            shard.trimmed = False
        self._observe_lag(shard.shard_id, page)

    def _observe_lag(self, shard_id: str, page: _Page) -> None:
        reader = self._opt.reader
        if page.next_iterator is None:
            STREAM_LAG.forget(shard_id, reader)
        elif page.records:
            created = page.records[-1]["dynamodb"].get("ApproximateCreationDateTime")
            STREAM_LAG.applied(shard_id, created, reader)
        else:
            STREAM_LAG.caught_up(shard_id, reader)

    def _on_error(self, shard: _Shard, exc: Exception) -> None:
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

    def _gap(self, checkpoint: ShardCheckpoint, reason: str) -> None:
        shard_id, sequence = checkpoint.shard_id, checkpoint.sequence
        if shard_id in self._reported:
            return
        self._reported.add(shard_id)
        gap = Gap(shard_id, sequence, reason, checkpoint.created, int(time.time()))
        self.gaps.append(gap)
        GAPS.inc()
        log.error(
            "STREAM GAP: shard %s, records after sequence %s expired unread (%s); "
            "the indexes may miss changes: run `%s`",
            shard_id,
            sequence or "<start of shard>",
            reason,
            gap.repair,
        )

    # -- the loop -----------------------------------------------------------------------------
    def run(self, stop: threading.Event, *, release: bool = True) -> None:
        """Read while holding the lease until ``stop`` is set. A clean stop finishes and commits
        the page in flight (renewals go on until then) and releases the lease;
        ``release=False`` simulates death: renewals end at once and the lease simply expires."""
        finished = threading.Event()
        beat = None
        if self._lease is not None:
            halted = finished if release else stop
            beat = threading.Thread(target=self._heartbeat, args=(halted,), daemon=True)
            beat.start()
        try:
            while not stop.is_set():
                if self._lease is not None and (
                    not self._lease.held or self._lease.generation != self._generation
                ):
                    self._reset()
                    stop.wait(0.2)
                    continue
                if not self.poll_once():
                    stop.wait(self.pause())
            if release and self._loaded:
                self._settle(drain=True)  # a clean stop commits what is in flight
        finally:
            finished.set()
            if beat is not None:
                beat.join()
            if release and self._lease is not None:
                self._lease.release()

    def _heartbeat(self, stop: threading.Event) -> None:
        """Acquire (standby) or renew (holder) the lease every ``renew_every_s``."""
        assert self._lease is not None
        while not stop.is_set():
            try:
                self._lease.acquire_or_renew()
            except Exception as exc:  # network trouble: `held` lapses on its own
                log.warning("lease renewal failed: %s", exc)
            stop.wait(self._opt.renew_every_s)
