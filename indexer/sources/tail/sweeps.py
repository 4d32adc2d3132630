"""Sweeps in flight: the pages of one sweep over the shards are sent as one set, and the
next sweep is read while its tasks run (design invariant 5: full text never waits behind
embedding), up to ``in_flight`` records; they are committed oldest first once answered.
"""

from __future__ import annotations

import logging

from indexer.adapters.aws.streams import portable
from indexer.core.records import RawRecord
from indexer.sources.tail.state import Shard, Sink, TailerState

log = logging.getLogger("indexer.sources.tail")


class SweepsInFlight(TailerState):
    """The sweeps sent and not yet committed, and the pause between two sweeps."""

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

    def _apply(self, shards: list[Shard]) -> Sink | None:
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
