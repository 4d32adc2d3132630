"""Typed errors of the pure core, and the kinds every failure is sorted into.

Each adapter classifies its own library's exceptions into an :class:`ErrorKind` (one
classification per engine, at its adapter: ``indexer.adapters.errors.classify`` asks them
all), so the tasks, the tailer and the API decide alike: *transient* → retry with backoff,
*poison* → dead-letter (or a 4xx to a caller), *config* → retry with backoff and no deadline
(never a dead letter), *unexpected* → bounded retries, then dead-letter. Each error carries a
reason a human can act on.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    TRANSIENT = "transient"  # may succeed later: engine down, throttled, timeout, 5xx
    POISON = "poison"  # can never succeed as is: dead-letter it, never retry
    # An engine refused the sidecar itself (401/403): every message would fail alike until an
    # operator fixes the deployment, and then every one succeeds — so wait, never dead-letter.
    CONFIG = "config"
    UNEXPECTED = "unexpected"  # anything else: a few retries, then dead-letter


class RecordError(ValueError):
    """A stream record that can never be applied (poison): it goes to the dead-letter store."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransientError(RuntimeError):
    """A failure that may succeed later (429, 5xx, timeouts, refused connections): retry.

    ``component`` names the engine where the one that asked it knows (the API's engine
    doors set it as the error passes, so its 503 can say which engine without wrapping)."""

    component: str | None = None


class ConfigurationError(TransientError):
    """An engine refused the sidecar's credentials or permissions (401/403: a wrong secret, a
    missing domain access policy or role mapping, a read-only block).

    Not the message's fault, so never poison: dead-lettering would drop every message of a
    misconfigured rollout while the stream reader checkpoints past them. A TransientError
    subclass, so every caller that retries outages (or answers 503) already does the right
    thing; the tasks additionally retry it without a deadline. ``component`` names the engine
    (a metric label), the message says what to check.
    """

    def __init__(self, component: str, reason: str) -> None:
        super().__init__(reason)
        self.component = component
        self.reason = reason


class PoisonError(ValueError):
    """An operation that can never succeed as is (an engine's permanent rejection of this
    input, e.g. an item over DynamoDB's 400 KB): dead-letter it without retrying."""


def kind_of(exc: BaseException) -> ErrorKind | None:
    """The kind of the core's own errors; ``None`` for an exception the core does not know."""
    if isinstance(exc, ConfigurationError | ImportError):
        # ImportError: the installation lacks a module (a venv or image older than the code);
        # no message's fault, so it stalls until the install is fixed instead of dead-lettering
        return ErrorKind.CONFIG
    if isinstance(exc, TransientError):
        return ErrorKind.TRANSIENT
    if isinstance(exc, PoisonError | RecordError):
        return ErrorKind.POISON
    return None
