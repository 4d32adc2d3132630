"""The export replay's second pass: one trigger per message, planning both indexes once."""

from __future__ import annotations

from indexer.core.plan import plan_records
from indexer.core.records import decode_record
from indexer.core.replay import ReplayFilter, participant_ref

K = "a" * 64


def _row(pk: str, sk: str) -> dict[str, object]:
    return {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": pk}, "SK": {"S": sk}}}}


def test_a_body_row_before_meta_syncs_full_text_once() -> None:
    body, meta = _row(f"M#box#MSG#{K}", "BODY"), _row(f"M#box#MSG#{K}", "META")
    person = _row("M#box#A#p@x.org", f"000000000001#{K}#to")
    message = _row("M#box#T#" + "b" * 64, f"MSG#000000000001#{K}")
    replay = ReplayFilter()
    fed = [t for r in (body, person, message, meta, body) if (t := replay.trigger(r)) is not None]
    assert len(fed) == 1
    plan = plan_records(decode_record(t) for t in fed)
    assert len(plan.fulltext) == len(plan.vectors) == 1 and not plan.participants


def test_unsynced_participants_and_unclassified_rows_pass_as_they_are() -> None:
    person = _row("M#box#A#p@x.org", f"000000000001#{K}#to")
    replay = ReplayFilter()
    ref = participant_ref(person)
    assert ref is not None
    replay.unsynced.add(ref)
    assert replay.trigger(person) is person
    assert replay.trigger({"not": "a record"}) == {"not": "a record"}
    meta = replay.trigger(_row(f"M#box#MSG#{K}", "META"))  # vectors still to sync
    assert meta is not None
