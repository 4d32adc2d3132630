"""``sidecar tail``'s loop: one step reads a page of every ready shard and sends the sweep;
``run`` repeats it while this process holds the table's lease (a standby runs beside it).
The parts: :mod:`.shards` (shards and lineage), :mod:`.sweeps` (in flight),
:mod:`.positions` (checkpoints, gaps, seeding).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from indexer.adapters.aws.io import error_code
from indexer.adapters.aws.streams import StreamReader
from indexer.adapters.dynamodb.state import Lease, ShardCheckpoint
from indexer.sources.tail.positions import PositionKeeping
from indexer.sources.tail.shards import ShardReading, is_transient
from indexer.sources.tail.state import (
    Gap,
    Shard,
    ShardPositions,
    Sink,
    Sweep,
    TailOptions,
)
from indexer.sources.tail.sweeps import SweepsInFlight

log = logging.getLogger("indexer.sources.tail")



class StreamTailer(ShardReading, SweepsInFlight, PositionKeeping):
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
        self._shards: dict[str, Shard] = {}
        self._saved: dict[str, ShardCheckpoint] = {}
        self._next_discovery = 0.0
        self._discovery_attempt = 0
        self._generation = self._lease.generation if self._lease else 0
        self._flight: deque[Sweep] = deque()

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
                self._flight.append(Sweep(sink, pages, self._opt.clock()))
            elif not self._flight:  # empty pages of open shards: no position to commit
                for shard, page in pages:
                    self._observe_lag(shard.shard_id, page)
        self._settle()
        return read

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
