"""The recount a full-text batch defers to a ``sidecar.contacts`` task: what it carries through
its JSON (addresses, the messages to see written or deleted), and that a payload of another
shape is refused rather than guessed at."""

from __future__ import annotations

import json

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
