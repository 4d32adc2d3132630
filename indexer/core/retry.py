"""Retry policy: exponential backoff with full jitter, bounded by an explicit retry count."""

from __future__ import annotations

import random


def backoff_seconds(attempt: int, *, base: float = 2.0, cap: float = 120.0) -> float:
    """Delay before retry number ``attempt`` (0-based): uniform in [base/2, min(cap, base·2^n)].

    Full jitter spreads retries of many workers hit by the same outage; the floor keeps a
    retry from firing instantly into an engine that just refused. The exponent is bounded: a
    batch stalled on a configuration error retries without limit, and 2.0·2^1100 overflows.
    """
    ceiling = min(cap, base * 2 ** min(attempt, 64))
    return random.uniform(min(base / 2, ceiling), ceiling)
