"""The sync task's payload is encoded and decoded in one place (issue 27)."""

from __future__ import annotations

import pytest

from indexer.core.plan import MessageRef, ParticipantRef
from indexer.core.task_payload import TaskPayload


def test_a_payload_survives_its_json_and_keeps_the_wire_shape() -> None:
    ref = MessageRef("box@example.com", "k1")
    payload = TaskPayload.of([ref], [ParticipantRef(ref, "P#1", "S#1")])
    wire = payload.to_json()
    assert wire == {"messages": [["box@example.com", "k1"]],
                    "participants": [["box@example.com", "k1", "P#1", "S#1"]]}
    assert TaskPayload.from_json(wire) == payload
    # Transport keys beside it (deployment stamp, retry clocks) are not the payload's.
    assert TaskPayload.from_json({**wire, "deployment": {"table": "t"}}) == payload
    assert TaskPayload.from_json({"messages": [["b", "k"]]}).participants == ()


@pytest.mark.parametrize("raw", [{"messages": [["only-one"]]}, {"messages": ["b", "k"]},
                                 {"messages": [], "participants": [["b", "k"]]}])
def test_a_ref_of_the_wrong_shape_is_refused(raw: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="ref is"):
        TaskPayload.from_json(raw)


def test_a_replay_is_marked_only_when_it_is_one() -> None:
    ref = MessageRef("box@example.com", "k1")
    wire = TaskPayload.of([ref], replay=True).to_json()
    assert wire["replay"] is True and TaskPayload.from_json(wire).replay
    assert "replay" not in TaskPayload.of([ref]).to_json()  # the live wire shape unchanged
    assert not TaskPayload.from_json({**wire, "replay": "yes"}).replay  # only a JSON true
