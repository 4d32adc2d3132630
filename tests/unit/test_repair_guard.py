"""The read-repair guard: once per message per window, and never raising (issue 16)."""

from __future__ import annotations

from collections.abc import Sequence

from search_api.repair import GuardedRepairs


class Recording:
    """The port's simplest implementation: remembers what it was asked."""

    def __init__(self, fail: bool = False) -> None:
        self.asked: list[tuple[str, list[str]]] = []
        self.fail = fail

    def request_repair(self, mailbox_id: str, message_keys: Sequence[str]) -> None:
        self.asked.append((mailbox_id, list(message_keys)))
        if self.fail:
            raise ConnectionError("broker down")


def test_each_message_is_asked_for_once_per_window() -> None:
    sink = Recording()
    guard = GuardedRepairs(sink, window_s=60)
    guard.request_repair("m", ["k1", "k2", "k1"])
    guard.request_repair("m", ["k1", "k3"])
    guard.request_repair("other", ["k1"])
    assert sink.asked == [("m", ["k1", "k2"]), ("m", ["k3"]), ("other", ["k1"])]


def test_after_the_window_a_message_is_asked_for_again() -> None:
    sink = Recording()
    guard = GuardedRepairs(sink, window_s=0)
    guard.request_repair("m", ["k1"])
    guard.request_repair("m", ["k1"])
    assert sink.asked == [("m", ["k1"]), ("m", ["k1"])]


def test_a_failing_sink_never_raises_and_is_retried_later() -> None:
    sink = Recording(fail=True)
    guard = GuardedRepairs(sink, window_s=60)
    guard.request_repair("m", ["k1"])  # no exception
    guard.request_repair("m", ["k1"])  # the failure did not count as asked
    assert sink.asked == [("m", ["k1"]), ("m", ["k1"])]
