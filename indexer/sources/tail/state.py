"""The tailer's shared types and state: pages, shards and sweeps, the ports it feeds and
saves positions to, its options, and the attributes its parts (mixins of
:class:`~indexer.sources.tail.loop.StreamTailer`, each one job) share — declared once here,
below every part, so no part imports another for its types."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from indexer.adapters.aws.streams import StreamReader
from indexer.adapters.dynamodb.state import Lease, ShardCheckpoint
from indexer.core.export_window import gap_command
from indexer.core.records import RawRecord

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
class Page:
    records: list[dict[str, Any]]
    next_iterator: str | None
    count: int = -1  # records read; -1: len(records) (a page in flight keeps only its last)

    def size(self) -> int:
        return len(self.records) if self.count < 0 else self.count


@dataclass(slots=True)
class Sweep:
    """Pages applied together and in flight until their last tasks (vectors) answer; the
    sink is None for a sweep of empty pages (nothing to wait for, only positions)."""

    sink: Sink | None
    pages: list[tuple[Shard, Page]]
    sent_at: float = 0.0


@dataclass(slots=True)
class Shard:
    shard_id: str
    parent_id: str | None
    checkpoint: ShardCheckpoint
    start: str = "TRIM_HORIZON"  # used only without a checkpoint
    iterator: str | None = None
    pending: Page | None = None  # read but not yet applied: retried as is, never re-read
    position: str | None = None  # last sequence read (ahead of the checkpoint while in flight)
    read_all: bool = False  # its last page is in flight: nothing more to read
    attempt: int = 0
    not_before: float = 0.0
    trimmed: bool = False  # the checkpointed position expired: go on from the oldest record


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


class TailerState:
    """Attributes only; :meth:`StreamTailer.__init__` and ``_reset`` set them."""

    _streams: StreamReader
    _arn: str
    _store: ShardPositions
    _lease: Lease | None
    _opt: TailOptions
    gaps: list[Gap]
    applied: int
    _reported: set[str]
    _fresh: bool
    _loaded: bool
    _shards: dict[str, Shard]
    _saved: dict[str, ShardCheckpoint]
    _next_discovery: float
    _discovery_attempt: int
    _generation: int
    _flight: deque[Sweep]
    _sink_factory: Callable[[], Sink]

    # What one part calls of another (the loop, the shards, the positions define them).
    def _backoff(self, attempt: int) -> float:
        raise NotImplementedError

    def _reset(self) -> None:
        raise NotImplementedError

    def _gap(self, checkpoint: ShardCheckpoint, reason: str) -> None:
        raise NotImplementedError

    def _commit(self, shard: Shard, page: Page) -> None:
        raise NotImplementedError
