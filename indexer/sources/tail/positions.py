"""Where a reader stands: checkpoints saved once a page is applied in both indexes (design
invariant 3), the lag observed, gaps reported loudly, and where a reader without
checkpoints of its own starts (seeding from the readers it replaces).

Records that expired (24 h retention) before being read cannot be recovered from the
stream: that is a *gap* (log, ``gaps``, a counter, the exit status) pointing to
``sidecar backfill``, never skipped silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from indexer.adapters.aws.streams import portable
from indexer.adapters.dynamodb.state import ShardCheckpoint
from indexer.metrics import GAPS, STREAM_LAG
from indexer.sources.tail.state import Gap, Page, Shard, ShardPositions, TailerState

log = logging.getLogger("indexer.sources.tail")


READERS = ("fulltext", "vectors")
# Whose positions a reader without checkpoints of its own starts from: the reader(s) that
# applied its stages before a `--stage` change ("" is `--stage all`'s checkpoint suffix).
PREDECESSORS: dict[str, tuple[str, ...]] = {"": READERS, "fulltext": ("",), "vectors": ("",)}


def earliest(layouts: Sequence[dict[str, ShardCheckpoint]]) -> dict[str, ShardCheckpoint]:
    """Per shard, the position that all ``layouts`` have applied (the earliest): a shard one of
    them lacks is read from its start, so nothing any of them missed is skipped."""
    merged: dict[str, ShardCheckpoint] = {}
    for sid in set().union(*layouts):
        found = [layout[sid] for layout in layouts if sid in layout]
        if len(found) < len(layouts):
            merged[sid] = ShardCheckpoint(sid, None)
        else:  # an open shard's position precedes a closed one's end
            merged[sid] = min(found, key=lambda c: (c.done, int(c.sequence or -1)))
    return merged


class SeededPositions:
    """A reader's own checkpoints; while it has none, the earliest positions of the readers it
    replaces, once they all have some. Switching `--stage` (e.g. the old default `each` to
    `all`) therefore neither re-reads the stream's whole retention nor, with `--start-at
    latest`, skips what the old readers had not applied yet."""

    def __init__(self, own: ShardPositions, before: Sequence[ShardPositions]) -> None:
        self._own, self._before = own, before

    def load(self) -> dict[str, ShardCheckpoint]:
        saved = self._own.load()
        if saved or not self._before:
            return saved
        layouts = [store.load() for store in self._before]
        return earliest(layouts) if all(layouts) else {}

    def save(self, checkpoint: ShardCheckpoint) -> None:
        self._own.save(checkpoint)


class PositionKeeping(TailerState):
    """Commits positions, observes lag and reports gaps."""

    def _commit(self, shard: Shard, page: Page) -> None:
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

    def _observe_lag(self, shard_id: str, page: Page) -> None:
        reader = self._opt.reader
        if page.next_iterator is None:
            STREAM_LAG.forget(shard_id, reader)
        elif page.records:
            created = page.records[-1]["dynamodb"].get("ApproximateCreationDateTime")
            STREAM_LAG.applied(shard_id, created, reader)
        else:
            STREAM_LAG.caught_up(shard_id, reader)

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
