"""Typed errors of the pure core. Each carries a reason a human can act on."""

from __future__ import annotations


class RecordError(ValueError):
    """A stream record that can never be applied (poison): it goes to the dead-letter store."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransientError(RuntimeError):
    """A failure that may succeed later (429, 5xx, timeouts, refused connections): retry."""


class PoisonError(ValueError):
    """An operation that can never succeed as is (e.g. a mapping rejection): dead-letter it."""
