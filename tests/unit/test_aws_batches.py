"""The batch calls' loop over what DynamoDB left unprocessed (throttled keys or writes): called
again with exactly that, until nothing is left, and a transient error after 10 calls. A
client that answers from a script stands in for DynamoDB here; the real calls run against the
emulator in the integration tier (``test_purge``, the participant store's tests)."""

from __future__ import annotations

from typing import Any

import pytest

from indexer.adapters.aws import io
from indexer.core.errors import TransientError


class _Scripted:
    """Answers each batch call with the next scripted response, recording the requests."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(RequestItems)
        return self.answers.pop(0) if self.answers else {}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(RequestItems)
        return self.answers.pop(0)


def test_deletes_go_25_a_call_and_what_was_left_is_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(io.time, "sleep", lambda _s: None)
    keys = [(f"P#m#{n}", "PEOPLE") for n in range(30)]
    left = {"t": [{"DeleteRequest": {"Key": {"PK": {"S": "P#m#3"}, "SK": {"S": "PEOPLE"}}}}]}
    client = _Scripted([{"UnprocessedItems": left}, {}, {}])
    assert io.batch_delete(client, "t", keys) == 30
    assert [len(r["t"]) for r in client.requests] == [25, 1, 5]
    assert client.requests[1] == left


def test_keys_left_unprocessed_are_read_again_and_every_item_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(io.time, "sleep", lambda _s: None)
    left = {"t": {"Keys": [{"PK": {"S": "b"}, "SK": {"S": "s"}}], "ConsistentRead": True}}
    client = _Scripted([{"Responses": {"t": [{"PK": {"S": "a"}}]}, "UnprocessedKeys": left},
                        {"Responses": {"t": [{"PK": {"S": "b"}}]}}])
    found = list(io.batch_get(client, "t", [("a", "s"), ("b", "s")]))
    assert [f["PK"]["S"] for f in found] == ["a", "b"]
    assert client.requests[1] == left


def test_a_table_that_keeps_throttling_is_a_transient_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(io.time, "sleep", lambda _s: None)
    left = {"t": [{"DeleteRequest": {"Key": {"PK": {"S": "k"}, "SK": {"S": "s"}}}}]}
    client = _Scripted([{"UnprocessedItems": left}] * 10)
    with pytest.raises(TransientError, match="UnprocessedItems"):
        io.batch_delete(client, "t", [("k", "s")])
    assert len(client.requests) == 10
