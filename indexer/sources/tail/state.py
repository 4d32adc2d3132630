"""What the tailer's parts share: one object's state, declared once for the type checker
(the parts are mixins of :class:`~indexer.sources.tail.loop.StreamTailer`, each one job)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from indexer.adapters.aws.streams import StreamReader
from indexer.adapters.dynamodb.state import Lease, ShardCheckpoint

if TYPE_CHECKING:
    from indexer.sources.tail.loop import TailOptions
    from indexer.sources.tail.positions import Gap, ShardPositions
    from indexer.sources.tail.shards import Page, Shard
    from indexer.sources.tail.sweeps import Sink, Sweep


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
