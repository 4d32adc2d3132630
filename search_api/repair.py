"""Read-repair behind a port: the API asks for repairs, ``sidecar serve`` says how.

A search that meets an indexed message whose hot row is gone drops the hit and asks for a
repair (the normal pipeline re-reads the table and deletes the message from both indexes).
``search_api`` knows only :class:`RepairSink`; the serve command wires the Celery one
(``indexer.pipeline.repair``). :class:`GuardedRepairs` sits in front of any sink: each
message is asked for at most once per ``window_s`` (a popular stale hit would otherwise
enqueue two tasks per search), and a failure to enqueue (Redis down) is logged and counted,
never raised: the search it came from still answers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from indexer.metrics import API_REPAIRS

log = logging.getLogger(__name__)
WINDOW_S = 60.0
MAX_REMEMBERED = 10_000


class RepairSink(Protocol):
    def request_repair(self, mailbox_id: str, message_keys: Sequence[str]) -> None:
        """Have the pipeline bring these messages' index entries in line with the table."""


class NoRepairs:
    """A sink for processes that index nothing (tools, tests): repairs are only logged."""

    def request_repair(self, mailbox_id: str, message_keys: Sequence[str]) -> None:
        log.info("repair not wired: %d stale hits left for reconcile", len(message_keys))


class GuardedRepairs:
    """De-duplicated per message for ``window_s``; never raises."""

    def __init__(self, sink: RepairSink, window_s: float = WINDOW_S) -> None:
        self._sink = sink
        self._window_s = window_s
        self._asked: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def _fresh(self, mailbox_id: str, message_keys: Sequence[str]) -> list[str]:
        now = time.monotonic()
        with self._lock:
            if len(self._asked) > MAX_REMEMBERED:
                self._asked = {k: t for k, t in self._asked.items() if now - t < self._window_s}
            fresh = [
                k
                for k in dict.fromkeys(message_keys)
                if now - self._asked.get((mailbox_id, k), -self._window_s) >= self._window_s
            ]
            for key in fresh:
                self._asked[(mailbox_id, key)] = now
        return fresh

    def request_repair(self, mailbox_id: str, message_keys: Sequence[str]) -> None:
        fresh = self._fresh(mailbox_id, message_keys)
        API_REPAIRS.labels("deduplicated").inc(len(message_keys) - len(fresh))
        if not fresh:
            return
        try:
            self._sink.request_repair(mailbox_id, fresh)
        except Exception as exc:  # the search still answers; reconcile catches up
            API_REPAIRS.labels("failed").inc(len(fresh))
            log.warning("could not enqueue %d repairs: %s", len(fresh), type(exc).__name__)
            with self._lock:  # let a later search try again
                for key in fresh:
                    self._asked.pop((mailbox_id, key), None)
            return
        API_REPAIRS.labels("requested").inc(len(fresh))
