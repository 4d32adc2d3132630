"""A pace for bulk maintenance: at most ``rate`` items per second, in small batches.

A purge of a whale deletes hundreds of thousands of documents and points from the engines
that answer everyone else's searches. Unpaced, the engines do that work as fast as they can
and on a small node it takes the CPU from the searches (measured: the others' p99 rose to
3× quiet on 2 cores). Paced, the same work is spread over a longer window in batches small
enough that no search waits behind one. ``rate`` 0 means as fast as the engines go.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

# batches per second at the set rate: small batches keep each engine call short
_BATCHES_PER_SECOND = 10
MAX_BATCH = 512


def batch_size(rate: float, largest: int = MAX_BATCH) -> int:
    """Items per engine call at ``rate`` per second (``largest`` when unpaced)."""
    if rate <= 0:
        return largest
    return max(1, min(largest, int(rate / _BATCHES_PER_SECOND)))


@dataclass
class Pace:
    """Sleeps after each batch until the items done so far are not ahead of ``rate`` per
    second since the first; a slow engine is never made slower (no sleep when behind)."""

    rate: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _began: float | None = field(default=None, init=False)
    _done: int = field(default=0, init=False)

    def start(self) -> None:
        """The pace's time zero (the first batch's start), once."""
        if self._began is None:
            self._began = self.clock()

    def done(self, items: int) -> None:
        """``items`` more are done: wait while they are ahead of the pace."""
        self.start()
        self._done += items
        if self.rate <= 0 or self._began is None:
            return
        ahead = self._done / self.rate - (self.clock() - self._began)
        if ahead > 0:
            self.sleep(ahead)
