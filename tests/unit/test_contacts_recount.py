"""The recount a full-text batch defers to a ``sidecar.contacts`` task: what it carries through
its JSON (addresses, the messages to see written or deleted), and that a payload of another
shape is refused rather than guessed at."""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from indexer.core.plan import MessageRef
from indexer.pipeline.contacts_sync import Recount, merged


def test_a_recount_survives_its_json() -> None:
    rc = Recount("box@x.org", frozenset({"a@x.org", "list@l.example"}),
                 {MessageRef("box@x.org", "k2"): False, MessageRef("box@x.org", "k1"): True})
    raw = json.loads(json.dumps(rc.to_json()))
    assert Recount.from_json(raw) == rc
    assert raw["emails"] == ["a@x.org", "list@l.example"]  # sorted: one payload per content
    assert raw["visible"] == [["box@x.org", "k1", True], ["box@x.org", "k2", False]]


@pytest.mark.parametrize("raw", [
    {},
    {"mailbox": "m", "emails": "a@x.org", "visible": []},
    {"mailbox": "m", "emails": [1], "visible": []},
    {"mailbox": "m", "emails": [], "visible": [["m", "k"]]},
    {"mailbox": "m", "emails": [], "visible": [["m", "k", "yes"]]},
    {"mailbox": "m", "emails": [], "visible": [["m", 5, True]]},
])
def test_a_payload_of_another_shape_is_refused(raw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Recount.from_json(raw)


def test_an_import_recounts_each_mailbox_once() -> None:
    a1 = Recount("a", frozenset({"x@e"}), {MessageRef("a", "1"): True})
    b1 = Recount("b", frozenset({"y@e"}), {MessageRef("b", "1"): True})
    a2 = Recount("a", frozenset({"z@e"}), {MessageRef("a", "1"): False,
                                           MessageRef("a", "2"): True})
    assert merged([a1, b1, a2]) == [
        Recount("a", frozenset({"x@e", "z@e"}), {MessageRef("a", "1"): False,
                                                 MessageRef("a", "2"): True}),
        b1,
    ]


class _Keeper:
    """Stands in for a ContactsKeeper (``index.wait_visible``, ``refresh``): records how many
    recounts of each mailbox are inside at once, and holds each inside until another recount
    is inside beside it (a barrier of two): with the locks, that is always the other
    mailbox's; without them, two of one mailbox could meet there."""

    def __init__(self) -> None:
        self.index = self
        self.lock = threading.Lock()
        self.inside: Counter[str] = Counter()
        self.most: Counter[str] = Counter()
        self.both = 0
        self.pair = threading.Barrier(2, timeout=10)  # broken (an error) if no one comes

    def wait_visible(self, visible: dict[MessageRef, bool], timeout_s: float) -> None:
        [mailbox] = {r.mailbox_id for r in visible}
        with self.lock:
            self.inside[mailbox] += 1
            self.most[mailbox] = max(self.most[mailbox], self.inside[mailbox])
            self.both = max(self.both, sum(1 for n in self.inside.values() if n))
        self.pair.wait()

    def refresh(self, mailbox: str, emails: frozenset[str]) -> int:
        with self.lock:
            self.inside[mailbox] -= 1
        return len(emails)


def test_one_mailboxs_recounts_run_one_at_a_time_and_other_mailboxes_beside_them() -> None:
    """The contacts worker's threads: recounts of one mailbox side by side would fight over
    the same contacts; two mailboxes' need not wait for each other."""
    from indexer.pipeline.contacts_sync import _mailbox_locks, recount

    a, b = "a@x.org", "b@x.org"
    assert len(_mailbox_locks([a, b])) == 2  # not sharing a lock (else the test says nothing)
    keeper = _Keeper()
    jobs = [Recount(m, frozenset({"p@e"}), {MessageRef(m, str(n)): True})
            for n in range(6) for m in (a, b)]
    with ThreadPoolExecutor(8) as pool:
        written = sum(pool.map(lambda rc: recount(keeper, [rc]), jobs))  # type: ignore[arg-type]
    assert written == 12
    assert keeper.most == Counter({a: 1, b: 1})
    assert keeper.both == 2
