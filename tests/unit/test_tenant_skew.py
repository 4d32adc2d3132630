"""The mailbox-size law of ``sidecar bench-tenants`` (pure: no service)."""

from __future__ import annotations

import pytest

from sidecar_tools.bench.tenants_mail import mailbox_sizes, perturbed, searched
from sidecar_tools.bench.tenants_measure import call_stats


@pytest.mark.parametrize(("messages", "mailboxes"), [(2_000, 200), (100_000, 2_000),
                                                     (1_000_000, 10_000), (300, 30)])
def test_sizes_sum_and_keep_the_skew(messages: int, mailboxes: int) -> None:
    sizes = mailbox_sizes(messages, mailboxes, 0.1, 300, 0.5)
    assert sum(sizes) == messages and len(sizes) == mailboxes
    assert min(sizes) >= 1
    assert sizes[0] == round(messages * 0.1)
    chosen = searched(sizes, 300)
    whale, mid, small = (sizes[chosen[c]] for c in ("whale", "mid", "small"))
    assert whale > mid >= small
    mids = min(300, (mailboxes - 1) // 3)
    # mid-size mailboxes hold half of what the whale leaves (rounding aside), the tail the rest
    assert abs(sum(sizes[1 : 1 + mids]) - round((messages - sizes[0]) * 0.5)) <= 1 or mids == 1


def test_too_few_messages_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 3 mailboxes"):
        mailbox_sizes(2, 3, 0.1, 1, 0.5)


def test_a_copy_has_other_ids_and_fewer_words() -> None:
    email = {"messageId": "<a@x>", "threadId": "<t@x>",
             "content": {"clean": " ".join(f"w{n}" for n in range(200))}}
    assert perturbed(email, 0) == email
    copy = perturbed(email, 1)
    assert copy["messageId"] != email["messageId"] and copy["threadId"] != email["threadId"]
    words = copy["content"]["clean"].split()
    assert 150 < len(words) < 200
    assert perturbed(email, 2)["content"]["clean"] != copy["content"]["clean"]


def test_groups_are_ordered_whale_mid_tail() -> None:
    """Every mid-size mailbox is at least as large as every tail one (rounding: +1)."""
    sizes = mailbox_sizes(100_000, 2_000, 0.1, 300, 0.5)
    assert sizes[0] > max(sizes[1:])
    assert min(sizes[1:301]) + 1 >= max(sizes[301:])


def test_purge_window_stats_keep_the_calls_before_a_cut() -> None:
    """The engines' window drops the calls begun during the purge's last steps, and the
    slowest calls are listed in time order."""
    calls = {"mid": [(0.1, 10.0), (1.0, 12.0), (2.0, 90.0), (3.0, 11.0)], "small": []}
    whole, engines = call_stats(calls), call_stats(calls, upto=1.5)
    assert whole["mid"]["calls"] == 4 and engines["mid"]["calls"] == 2
    assert engines["mid"]["p99_ms"] < 12.1 < whole["mid"]["p99_ms"]
    assert whole["mid"]["slowest"][:2] == [[0.1, 10.0], [1.0, 12.0]]
    assert engines["small"]["calls"] == 0
