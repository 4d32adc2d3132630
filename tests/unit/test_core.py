"""Pure tests of the core: stream records → typed changes → plan → projections."""

from __future__ import annotations

import base64
import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexer.core.documents import (
    MessageState,
    Participant,
    point_id,
    search_document,
    text_hash,
    vector_target,
)
from indexer.core.dynamo_json import decode_item, decode_value
from indexer.core.errors import RecordError
from indexer.core.items import ItemKind, classify
from indexer.core.plan import MessageRef, Plan
from indexer.core.recipes import Recipe
from indexer.core.records import EventName, decode_record, unwrap

MK = "a" * 64
TK = "b" * 64


def stream_record(pk: str, sk: str, event: str = "INSERT", **extra: object) -> dict[str, object]:
    image = {"PK": {"S": pk}, "SK": {"S": sk}, **extra}
    return {
        "eventID": "1",
        "eventName": event,
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "Keys": {"PK": {"S": pk}, "SK": {"S": sk}},
            "NewImage": image if event != "REMOVE" else None,
            "OldImage": image if event != "INSERT" else None,
            "SequenceNumber": "1" * 38,
            "ApproximateCreationDateTime": 1700000000,
        },
    }


def test_numbers_are_int_or_decimal_never_float() -> None:
    assert decode_value({"N": "12"}) == 12
    assert isinstance(decode_value({"N": "12"}), int)
    assert decode_value({"N": "1.50"}) == Decimal("1.50")
    assert decode_value({"N": "1e3"}) == 1000
    with pytest.raises(RecordError, match="not a number"):
        decode_value({"N": "abc"})
    with pytest.raises(RecordError, match="finite"):
        decode_value({"N": "NaN"})


def test_all_types_and_unknown_attributes() -> None:
    item = decode_item(
        {
            "s": {"S": "x"},
            "n": {"NULL": True},
            "b": {"BOOL": False},
            "l": {"L": [{"S": "a"}, {"N": "1"}]},
            "m": {"M": {"k": {"S": "v"}}},
            "ss": {"SS": ["a", "b"]},
            "bin": {"B": base64.b64encode(b"hi").decode()},
            "future_attr": {"S": "kept"},
        }
    )
    assert item == {
        "s": "x",
        "n": None,
        "b": False,
        "l": ["a", 1],
        "m": {"k": "v"},
        "ss": {"a", "b"},
        "bin": b"hi",
        "future_attr": "kept",
    }


@pytest.mark.parametrize(
    "bad", [{"S": 12}, {"X": "1"}, {"S": "a", "N": "1"}, "plain", {"BOOL": "yes"}]
)
def test_wrong_types_are_record_errors(bad: object) -> None:
    with pytest.raises(RecordError):
        decode_value(bad)


def test_lone_surrogate_is_poison() -> None:
    raw = json.loads('{"S": "ok \\ud800 bad"}')
    with pytest.raises(RecordError, match="lone surrogate"):
        decode_value(raw)


def test_decode_lambda_kinesis_and_bare_records() -> None:
    bare = stream_record(f"M#box#MSG#{MK}", "BODY")
    lam = {"Records": [bare, bare]}
    assert len(list(unwrap(lam))) == 2
    rec = decode_record(bare)
    assert rec.event_name is EventName.INSERT and rec.pk == f"M#box#MSG#{MK}"
    assert rec.approximate_creation == 1700000000.0
    kinesis_payload = {**bare, "tableName": "t", "awsRegion": "us-east-1"}
    kinesis_payload["dynamodb"] = {**bare["dynamodb"], "ApproximateCreationDateTime": 1700000000123}  # type: ignore[dict-item]
    wrapped = {"kinesis": {"data": base64.b64encode(json.dumps(kinesis_payload).encode()).decode()}}
    krec = decode_record(wrapped)
    assert krec.approximate_creation == pytest.approx(1700000000.123)
    assert krec.sk == "BODY"


def test_ttl_remove_is_flagged() -> None:
    raw = stream_record(f"M#box#MSG#{MK}", "META", "REMOVE")
    raw["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert decode_record(raw).ttl_delete


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r.pop("dynamodb"),
        lambda r: r.update(eventName="UPSERT"),
        lambda r: r["dynamodb"].update(Keys={"PK": {"S": "x"}}),
        lambda r: r["dynamodb"].update(SequenceNumber="12ab"),
    ],
)
def test_malformed_records_raise_with_reason(mutate: object) -> None:
    raw = stream_record(f"M#box#MSG#{MK}", "BODY")
    mutate(raw)  # type: ignore[operator]
    with pytest.raises(RecordError) as info:
        decode_record(raw)
    assert info.value.reason


@pytest.mark.parametrize(
    ("pk", "sk", "kind"),
    [
        (f"M#box#T#{TK}", f"MSG#000001700000#{MK}", ItemKind.MESSAGE),
        (f"M#box#MSG#{MK}", "BODY", ItemKind.BODY),
        (f"M#box#MSG#{MK}", "META", ItemKind.POINTER),
        (f"M#box#T#{TK}", "THREAD", ItemKind.THREAD),
        ("M#box#A#carol@example.com", f"000001700000#{MK}#cc", ItemKind.PARTICIPANT),
        (f"M#box#R#{TK}", MK, ItemKind.REFERENCE),
    ],
)
def test_classify(pk: str, sk: str, kind: ItemKind) -> None:
    ref = classify(pk, sk)
    assert ref.kind is kind and ref.mailbox_id == "box"


def test_classify_participant_with_hash_in_email_and_unicode_mailbox() -> None:
    ref = classify("M#boîte ü#A#we#ird@example.com", f"000001700000#{MK}#to")
    assert ref.mailbox_id == "boîte ü" and ref.message_key == MK and ref.role == "to"


@pytest.mark.parametrize(
    ("pk", "sk"),
    [
        ("X#box#T#" + TK, "THREAD"),
        (f"M#box#Z#{TK}", "x"),
        (f"M#box#MSG#{MK}", "OTHER"),
        (f"M#box#MSG#{MK[:-1]}", "BODY"),
        (f"M#box#T#{TK}", f"MSG#1#{MK}"),
        ("M##T#" + TK, "THREAD"),
        ("M#box#A#x@y", f"000001700000#{MK}#boss"),
    ],
)
def test_unknown_shapes_are_rejected(pk: str, sk: str) -> None:
    with pytest.raises(RecordError):
        classify(pk, sk)


def test_plan_routes_items_to_sinks_and_collapses_duplicates() -> None:
    plan = Plan()
    for raw in (
        stream_record(f"M#box#T#{TK}", f"MSG#000001700000#{MK}"),
        stream_record(f"M#box#T#{TK}", f"MSG#000001700000#{MK}", "MODIFY"),
        stream_record(f"M#box#MSG#{MK}", "BODY"),
        stream_record("M#box#A#c@x.org", f"000001700000#{MK}#cc"),
        stream_record(f"M#box#T#{TK}", "THREAD"),
        stream_record(f"M#box#R#{TK}", MK),
    ):
        plan.add(decode_record(raw))
    ref = MessageRef("box", MK)
    assert plan.fulltext == {ref} and plan.vectors == {ref}
    assert len(plan.participants) == 1 and plan.ignored == 2

    body_only = Plan()
    body_only.add(decode_record(stream_record(f"M#box#MSG#{MK}", "BODY", "REMOVE")))
    assert body_only.fulltext == {ref} and body_only.vectors == set()


def _state(**message: object) -> MessageState:
    base = {
        "thread_key": TK,
        "ts": Decimal(1700000000),
        "message_id": "<m@x>",
        "subject": "Hi",
        "from_email": "a@x.org",
        "from_name": "A",
        "forai": "hello",
        "date": None,
        "attachment_count": Decimal(2),
        "spec_version": "1.0",
    }
    base.update(message)
    people = (
        Participant("to", "b@x.org", "B"),
        Participant("bcc", "secret@x.org", None),
        Participant("cc", "c@x.org", None),
    )
    return MessageState(MessageRef("box", MK), base, {"clean": "body text", "text": "raw"}, people)


def test_search_document_never_holds_bcc_forai_or_text() -> None:
    doc = search_document(_state())
    assert doc is not None
    assert doc["to"] == ["b@x.org"] and doc["cc"] == ["c@x.org"]
    assert "secret@x.org" not in json.dumps(doc)
    assert "forai" not in doc and "hello" not in json.dumps(doc) and "raw" not in json.dumps(doc)
    assert doc["ts"] == 1700000000 and doc["attachment_count"] == 2 and doc["clean"] == "body text"
    assert search_document(MessageState(MessageRef("box", MK), None, None)) is None


def test_bad_date_string_does_not_poison_the_document() -> None:
    assert search_document(_state(date="not a date"))["date"] is None  # type: ignore[index]
    assert search_document(_state(date="2012-01-04T04:52:48Z"))["date"] == "2012-01-04T04:52:48Z"  # type: ignore[index]


@pytest.mark.parametrize("forai", [None, "", "   "])
def test_no_point_without_forai(forai: str | None) -> None:
    assert vector_target(_state(forai=forai)).text is None


def test_vector_payload() -> None:
    target = vector_target(_state(subject="Re: [list] Hi"))
    assert target.text == "Hi\n\nhello"  # the default recipe, subject-forai
    assert target.payload == {
        "mailbox_id": "box",
        "message_key": MK,
        "thread_key": TK,
        "ts": 1700000000,
        "from": "a@x.org",
        "content_hash": text_hash("Hi\n\nhello"),  # covers the whole embedded text
    }
    forai = vector_target(_state(subject="Re: [list] Hi"), "forai")
    assert forai.text == "hello" and forai.payload["content_hash"] == text_hash("hello")


def test_the_content_hash_follows_the_subject_only_under_subject_forai() -> None:
    def digest(subject: str, recipe: Recipe) -> object:
        return vector_target(_state(subject=subject), recipe).payload["content_hash"]

    assert digest("Re: Hi", "subject-forai") == digest("Fwd: Hi", "subject-forai")  # same text
    assert digest("Hi", "subject-forai") != digest("Bye", "subject-forai")  # re-embedded
    assert digest("Hi", "forai") == digest("Bye", "forai")


@given(
    st.text(
        alphabet=st.characters(blacklist_characters="#", blacklist_categories=["Cs"]), min_size=1
    ),
    st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
)
def test_point_ids_are_deterministic_and_mailbox_scoped(mailbox: str, key: str) -> None:
    ref = MessageRef(mailbox, key)
    assert point_id(ref) == point_id(MessageRef(mailbox, key))
    assert point_id(ref) != point_id(MessageRef(mailbox + "x", key))
