"""The export replay filter (pure): each message once per index, unsynced participants always,
unreadable rows always (the ingest path dead-letters them)."""

from __future__ import annotations

from typing import Any

from indexer.core.items import message_pk, message_sk, thread_pk
from indexer.core.plan import MessageRef, ParticipantRef
from indexer.core.replay import ReplayFilter, participant_ref

BOX = "box@x.org"
K1, K2, THREAD = "a" * 64, "b" * 64, "c" * 64


def _row(pk: str, sk: str) -> dict[str, Any]:
    keys = {"PK": {"S": pk}, "SK": {"S": sk}}
    return {"eventName": "INSERT", "dynamodb": {"Keys": keys, "NewImage": dict(keys)}}


def _participant(key: str, email: str) -> dict[str, Any]:
    return _row(f"M#{BOX}#A#{email}", f"000000000001#{key}#to")


def test_each_message_once_per_index() -> None:
    replay = ReplayFilter()
    body = _row(message_pk(BOX, K1), "BODY")
    message = _row(thread_pk(BOX, THREAD), message_sk(1, K1))
    meta = _row(message_pk(BOX, K1), "META")
    # Body first: full text only, so the Message row is still needed for the vectors.
    assert [replay.admit(r) for r in (body, message, meta, body)] == [True, True, False, False]
    assert replay.admit(_participant(K1, "p@x.org")) is False
    assert replay.admit(_participant(K2, "p@x.org")) is True  # another message
    assert replay.admit(_row(thread_pk(BOX, THREAD), message_sk(1, K2))) is True  # its vectors


def test_unsynced_participants_and_bad_rows_always_pass() -> None:
    row = _participant(K1, "q@x.org")
    ref = participant_ref(row)
    assert ref == ParticipantRef(MessageRef(BOX, K1), f"M#{BOX}#A#q@x.org",
                                 f"000000000001#{K1}#to")
    replay = ReplayFilter(unsynced={ref})
    assert replay.admit(_row(thread_pk(BOX, THREAD), message_sk(1, K1))) is True
    assert replay.admit(row) is True and replay.admit(row) is True
    assert replay.admit({"not": "a record"}) is True
    assert replay.admit(_row(f"M#{BOX}#T#{THREAD}", "THREAD")) is True  # ignored downstream
    assert participant_ref(_row(message_pk(BOX, K1), "META")) is None
