"""How many expensive searches one caller may run at once.

The clause bound keeps each search affordable; this keeps one caller from running many of
them side by side and taking every engine thread from the other tenants. An expensive
search is one whose query expands to ``EXPENSIVE_CLAUSES`` engine clauses or more (prefixes,
many words or fields); a caller is its bearer credential (hashed, never kept as is).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from search_api.query import Node, build_query
from search_api.query.expansion import estimated_clauses

EXPENSIVE_CLAUSES = 100


class TooManyExpensive(Exception):
    """The caller already runs its share of expensive searches: a 429 with Retry-After."""

    def __init__(self, allowed: int) -> None:
        super().__init__(
            f"this caller already runs {allowed} expensive search(es) (many prefixes or "
            "words; SIDECAR_API_EXPENSIVE_PER_TOKEN): retry when it has answered"
        )


def is_expensive(node: Node) -> bool:
    """The query's engine cost, as the clause bound counts it (pure: no engine asked)."""
    return estimated_clauses(build_query(node, "-")) >= EXPENSIVE_CLAUSES


def caller_key(authorization: str | None) -> str:
    """A caller's identity for counting: a digest of its credential."""
    return hashlib.sha256((authorization or "").encode("utf-8", "surrogatepass")).hexdigest()


class ExpensiveGate:
    """At most ``allowed`` expensive searches per caller at once (one process's count)."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self._running: dict[str, int] = {}
        self._lock = threading.Lock()

    @contextmanager
    def admit(self, caller: str, expensive: bool) -> Iterator[None]:
        """Run the body, or raise :class:`TooManyExpensive` at once (never queue it)."""
        if not expensive:
            yield
            return
        with self._lock:
            if self._running.get(caller, 0) >= self.allowed:
                raise TooManyExpensive(self.allowed)
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
