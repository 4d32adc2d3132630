"""How many expensive searches one caller may run at once, and how often.

The clause bound keeps each search affordable; this keeps one caller from running many of
them side by side, or back to back, and taking the engine from the other tenants: at most
``allowed`` at once, and ``per_second`` on average (a token bucket holding a burst of
``2 * per_second``). An expensive
search is one whose query expands to ``EXPENSIVE_CLAUSES`` engine clauses or more (prefixes,
many words or fields); a caller is its bearer credential (hashed, never kept as is).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from search_api.query import Node, build_query
from search_api.query.expansion import estimated_clauses

EXPENSIVE_CLAUSES = 100


class TooManyExpensive(Exception):
    """The caller already runs its share of expensive searches: a 429 with Retry-After."""

    def __init__(self, reason: str, retry_after_s: int = 1) -> None:
        super().__init__(f"{reason}: retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


def is_expensive(node: Node) -> bool:
    """The query's engine cost, as the clause bound counts it (pure: no engine asked)."""
    return estimated_clauses(build_query(node, "-")) >= EXPENSIVE_CLAUSES


def caller_key(authorization: str | None) -> str:
    """A caller's identity for counting: a digest of its credential."""
    return hashlib.sha256((authorization or "").encode("utf-8", "surrogatepass")).hexdigest()


class ExpensiveGate:
    """At most ``allowed`` expensive searches per caller at once and ``per_second`` on
    average (one process's count; callers idle for a minute are forgotten)."""

    def __init__(self, allowed: int, per_second: float = 2.0) -> None:
        self.allowed = allowed
        self.per_second = per_second
        self._running: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, at)
        self._lock = threading.Lock()

    def _take(self, caller: str, now: float) -> None:
        """One token from the caller's bucket, or :class:`TooManyExpensive`."""
        burst = 2 * self.per_second
        tokens, at = self._buckets.get(caller, (burst, now))
        tokens = min(burst, tokens + (now - at) * self.per_second)
        if tokens < 1:
            wait = math.ceil((1 - tokens) / self.per_second)
            raise TooManyExpensive(
                f"this caller runs more than {self.per_second:g} expensive searches a second "
                "(SIDECAR_API_EXPENSIVE_PER_SECOND)", wait)
        self._buckets[caller] = (tokens - 1, now)
        if len(self._buckets) > 10_000:  # forget idle callers
            self._buckets = {c: v for c, v in self._buckets.items() if now - v[1] < 60}

    @contextmanager
    def admit(self, caller: str, expensive: bool) -> Iterator[None]:
        """Run the body, or raise :class:`TooManyExpensive` at once (never queue it)."""
        if not expensive:
            yield
            return
        with self._lock:
            if self._running.get(caller, 0) >= self.allowed:
                raise TooManyExpensive(
                    f"this caller already runs {self.allowed} expensive search(es) (many "
                    "prefixes or words; SIDECAR_API_EXPENSIVE_PER_TOKEN)")
            self._take(caller, time.monotonic())
            self._running[caller] = self._running.get(caller, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._running[caller] - 1
                if left:
                    self._running[caller] = left
                else:
                    del self._running[caller]
