"""How many requests, and how many expensive searches, one caller may run — and all callers.

The clause bound keeps each search affordable; this keeps one caller from running many of
them side by side, or back to back, and taking the engine from the other tenants:

- every request of a caller counts against its rate (:class:`RequestRate`, a token bucket of
  ``SIDECAR_API_REQUESTS_PER_SECOND`` holding a burst of twice that), refused right after
  authentication, before any engine is asked;
- an expensive search — a query of ``EXPENSIVE_CLAUSES`` engine clauses or more (prefixes, many
  words or fields), and ``collapse=thread`` weighed by the groups it re-runs the query for —
  runs at most ``allowed`` at once per caller, ``per_second`` on average, and at most
  ``in_flight`` at once from all callers together (:class:`ExpensiveGate`); every "similar"
  (three engine queries of 25 terms) is held to the two caps of searches at once.

A caller is its **principal**, not its header: a JWT's issuer and subject (so every token of a
user is one caller), else the digest of the bearer token as authentication parsed it (so
``Bearer T``, ``bearer T`` and ``Bearer  T`` are one caller). The counts are this process's:
each API replica has its own budget (a principal gets N times it over N replicas; a global cap
is the load balancer's, e.g. a WAF rate-based rule).
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import jwt

from indexer.settings import Settings
from search_api.query import Node, build_query
from search_api.query.expansion import estimated_clauses

EXPENSIVE_CLAUSES = 100
# collapse=thread: OpenSearch runs the query once more per group (its inner hits), in
# parallel; a page of N groups is weighed as 1 + N / 10 queries.
COLLAPSE_GROUPS_PER_QUERY = 10


class TooManyExpensive(Exception):
    """The caller already runs its share (or the process all it takes): a 429 with
    Retry-After."""

    def __init__(self, reason: str, retry_after_s: int = 1) -> None:
        super().__init__(f"{reason}: retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


def search_cost(node: Node, *, collapse: bool = False, limit: int = 20) -> int:
    """The query's engine cost in clauses, as the clause bound counts them (pure: no engine
    asked), times the queries ``collapse`` adds."""
    clauses = estimated_clauses(build_query(node, "-"))
    if collapse:
        clauses = clauses * (COLLAPSE_GROUPS_PER_QUERY + limit) // COLLAPSE_GROUPS_PER_QUERY
    return clauses


def is_expensive(node: Node, *, collapse: bool = False, limit: int = 20) -> bool:
    """Whether the search is one the gate counts."""
    return search_cost(node, collapse=collapse, limit=limit) >= EXPENSIVE_CLAUSES


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def principal_key(credential: str) -> str:
    """Who asks, once authentication accepted ``credential``: ``jwt:`` and the digest of a
    JWT's issuer and subject, else ``token:`` and the digest of the token (never kept as is).
    The JWT's signature was checked by authentication; here its claims are only read."""
    token = credential.strip()
    if token.count(".") == 2:
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            claims = {}
        issuer, subject = claims.get("iss"), claims.get("sub")
        if isinstance(issuer, str) and isinstance(subject, str):
            return "jwt:" + _digest(f"{issuer}\n{subject}")
    return "token:" + _digest(token)


class _Buckets:
    """Token buckets by caller (``per_second`` refill, a burst of twice that); callers idle for
    a minute are forgotten once there are many."""

    def __init__(self, per_second: float) -> None:
        self.per_second = per_second
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens, at)

    def take(self, caller: str, now: float) -> int:
        """Take one token: 0, or the seconds to wait for one (nothing taken)."""
        burst = 2 * self.per_second
        tokens, at = self._buckets.get(caller, (burst, now))
        tokens = min(burst, tokens + (now - at) * self.per_second)
        if tokens < 1:
            return max(1, math.ceil((1 - tokens) / self.per_second))
        self._buckets[caller] = (tokens - 1, now)
        if len(self._buckets) > 10_000:
            self._buckets = {c: v for c, v in self._buckets.items() if now - v[1] < 60}
        return 0


class RequestRate:
    """Every request of a caller: ``per_second`` on average (this process's count)."""

    def __init__(self, per_second: float) -> None:
        self._buckets = _Buckets(per_second)
        self._lock = threading.Lock()

    def admit(self, caller: str) -> None:
        """Count the request, or raise :class:`TooManyExpensive` (a 429) at once."""
        with self._lock:
            wait = self._buckets.take(caller, time.monotonic())
        if wait:
            raise TooManyExpensive(
                f"this caller makes more than {self._buckets.per_second:g} requests a second "
                "(SIDECAR_API_REQUESTS_PER_SECOND)", wait)


class ExpensiveGate:
    """At most ``allowed`` expensive searches per caller at once and ``per_second`` on
    average, and ``in_flight`` at once from every caller together (one process's count)."""

    def __init__(self, allowed: int, per_second: float = 2.0, in_flight: int = 4) -> None:
        self.allowed = allowed
        self.in_flight = in_flight
        self._running: dict[str, int] = {}
        self._buckets = _Buckets(per_second)
        self._lock = threading.Lock()

    @property
    def per_second(self) -> float:
        return self._buckets.per_second

    def _check(self, caller: str, rated: bool) -> None:
        """Raise :class:`TooManyExpensive` unless one more may start (under the lock)."""
        if self._running.get(caller, 0) >= self.allowed:
            raise TooManyExpensive(
                f"this caller already runs {self.allowed} expensive search(es) (many "
                "prefixes or words, collapse, similar; SIDECAR_API_EXPENSIVE_PER_TOKEN)")
        if sum(self._running.values()) >= self.in_flight:
            raise TooManyExpensive(
                f"this API process already runs {self.in_flight} expensive searches "
                "(SIDECAR_API_EXPENSIVE_IN_FLIGHT)")
        wait = self._buckets.take(caller, time.monotonic()) if rated else 0
        if wait:
            raise TooManyExpensive(
                f"this caller runs more than {self.per_second:g} expensive searches a second "
                "(SIDECAR_API_EXPENSIVE_PER_SECOND)", wait)

    @contextmanager
    def admit(self, caller: str, expensive: bool, *, rated: bool = True) -> Iterator[None]:
        """Run the body, or raise :class:`TooManyExpensive` at once (never queue it).
        ``rated=False``: held to the caps of searches at once only, not to the caller's
        rate of expensive searches ("similar": one click, one request, costly but bounded)."""
        if not expensive:
            yield
            return
        with self._lock:
            self._check(caller, rated)
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


@dataclass(frozen=True)
class Gates:
    """This process's admission: every caller's request rate, and the expensive searches by
    caller and in all (replicas do not share them: docs/concepts/tenancy.md)."""

    rate: RequestRate
    expensive: ExpensiveGate

    @classmethod
    def of(cls, settings: Settings) -> Gates:
        return cls(RequestRate(settings.api_requests_per_second),
                   ExpensiveGate(settings.api_expensive_per_token,
                                 settings.api_expensive_per_second,
                                 settings.api_expensive_in_flight))
