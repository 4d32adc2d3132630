"""Pure tests of NormalizedEmail → store items, against hand-checked expectations."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from sidecar_tools.writer.mapping import (
    ITEM_BUDGET_BYTES,
    ThreadUpdate,
    item_size,
    thread_after_insert,
    thread_summary,
    to_items,
)
from sidecar_tools.writer.parse import InvalidEmail

# sha256 hex of the ids below, computed once with `sha256sum` and pasted.
MK = "15518b10f6c5d78571e376bba50af9a8d7a8204f7f7b906a64941ef2e568e85b"  # m1@example.com
TK = "cf5adc84529f45b4f32b940825b4f79b66fc382bef168a1b2610ae6c1c191ba8"  # t1@example.com
RK = "1ba2a79a5d4889e2a53e0893c54220fe061d801f2d406582a9c3a296a7c20d0c"  # r0@example.com
ALICE = "2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90"  # alice
TS = 1704164645  # 2024-01-02T03:04:05Z

SMALL: dict[str, Any] = {
    "messageId": "m1@example.com",
    "threadId": "t1@example.com",
    "metadata": {
        "from": {"name": "Bob Example", "email": "Bob@Example.COM"},
        "to": [{"name": None, "email": "alice@example.com"}],
        "cc": [{"name": "Carol", "email": "carol@example.org"}],
        "bcc": [],
        "subject": "Hello",
        "date": "2024-01-02T03:04:05Z",
        "timestamp": TS,
    },
    "content": {"rawFull": None, "raw": None, "html": None,
                "text": "Hi\n> old", "clean": "Hi", "forAI": "Hi"},
    "thread": {"position": None, "inReplyTo": "r0@example.com", "references": ["r0@example.com"]},
    "attachments": [],
    "processing": {"processedAt": "2024-01-02T03:05:00Z", "specVersion": "1.0",
                   "cleanFallback": False},
}


def email(**changes: Any) -> dict[str, Any]:
    """SMALL with top-level or dotted (``metadata.to``) fields replaced."""
    out = copy.deepcopy(SMALL)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        target = out
        for p in parents:
            target = target[p]
        target[leaf] = value
    return out


def test_small_email_items_are_exact() -> None:
    items = to_items(SMALL, "alice")
    assert (items.message_key, items.thread_key, items.ts) == (MK, TK, TS)
    assert items.message == {
        "PK": f"M#alice#T#{TK}", "SK": f"MSG#001704164645#{MK}",
        "mailbox_id": "alice", "message_key": MK, "message_id": "m1@example.com",
        "thread_key": TK, "thread_id": "t1@example.com", "ts": TS,
        "date": "2024-01-02T03:04:05Z", "from_email": "bob@example.com",
        "from_name": "Bob Example", "subject": "Hello", "in_reply_to": "r0@example.com",
        "forai": "Hi", "attachment_count": 0, "size_bytes": None, "clean_fallback": 0,
        "spec_version": "1.0", "processed_at": "2024-01-02T03:05:00Z", "blob_prefix": None,
        "x_fields": None, "GSI1PK": "M#alice", "GSI1SK": f"001704164645#{MK}",
    }
    assert items.body == {"PK": f"M#alice#MSG#{MK}", "SK": "BODY", "mailbox_id": "alice",
                          "message_key": MK, "text": "Hi\n> old", "clean": "Hi"}
    assert items.pointer == {"PK": f"M#alice#MSG#{MK}", "SK": "META", "thread_key": TK, "ts": TS}
    common = {"thread_key": TK, "subject": "Hello", "mailbox_id": "alice",
              "message_key": MK, "ts": TS}
    assert items.participants == [
        {"PK": "M#alice#A#bob@example.com", "SK": f"001704164645#{MK}#from", **common,
         "role": "from", "email": "bob@example.com", "name": "Bob Example"},
        {"PK": "M#alice#A#alice@example.com", "SK": f"001704164645#{MK}#to", **common,
         "role": "to", "email": "alice@example.com", "name": None},
        {"PK": "M#alice#A#carol@example.org", "SK": f"001704164645#{MK}#cc", **common,
         "role": "cc", "email": "carol@example.org", "name": "Carol"},
    ]
    assert items.references == [{"PK": f"M#alice#R#{RK}", "SK": MK,
                                  "message_id": "m1@example.com", "ts": TS,
                                  "ref_id": "r0@example.com", "position": 0}]
    assert items.thread == ThreadUpdate(f"M#alice#T#{TK}", TK, "t1@example.com", "Hello", TS,
                                        MK, "alice")


def test_keys_are_sha256_of_utf8_ids() -> None:
    items = to_items(email(messageId="abc", threadId="abc"), "alice")
    abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # FIPS 180-2 vector
    assert items.message_key == items.thread_key == abc
    accented = to_items(email(messageId="café@x"), "alice").message_key  # é = 2 UTF-8 bytes
    assert accented == "1aca377c32ca79d3408c4597c20f4a211dc8f23f4a745cd9adb1d15ebdbcfc6d"


def test_null_date_sorts_by_processed_at() -> None:
    items = to_items(email(metadata__date=None, metadata__timestamp=None,
                           processing__processedAt="2026-11-30T00:00:00Z"), "alice")
    assert items.ts == 1795996800
    assert items.message["date"] is None
    assert items.message["SK"] == f"MSG#001795996800#{MK}"
    assert items.pointer["ts"] == 1795996800


def test_no_date_and_no_processed_at_is_rejected() -> None:
    with pytest.raises(InvalidEmail, match="processedAt"):
        to_items(email(metadata__timestamp=None, processing=None), "alice")


@pytest.mark.parametrize("mailbox", ["a#b", "", "tab\there", "new\nline"])
def test_bad_mailbox_ids_are_rejected(mailbox: str) -> None:
    with pytest.raises(InvalidEmail, match="mailbox id"):
        to_items(SMALL, mailbox)


def test_unicode_mailbox_id_is_accepted() -> None:
    items = to_items(SMALL, "boîte aux lettres 📬")
    assert items.message["PK"] == f"M#boîte aux lettres 📬#T#{TK}"
    assert items.message["GSI1PK"] == "M#boîte aux lettres 📬"


def test_a_200_kb_body_is_kept_whole() -> None:
    text = "x" * 200_000
    items = to_items(email(content={"text": text, "clean": text[:150_000]}), "alice")
    assert items.body["text"] == text and len(items.body["clean"]) == 150_000
    assert "body_truncated" not in items.body


def test_an_oversized_body_shrinks_text_first() -> None:
    items = to_items(email(content={"text": "t" * 300_000, "clean": "c" * 200_000}), "alice")
    assert items.body["clean"] == "c" * 200_000
    assert 0 < len(items.body["text"]) < 200_000
    assert items.body["body_truncated"] == 1
    assert item_size(items.body) <= ITEM_BUDGET_BYTES


def test_a_huge_clean_is_cut_on_a_utf8_boundary() -> None:
    items = to_items(email(content={"text": "t" * 10, "clean": "é" * 300_000}), "alice")
    assert items.body["text"] == ""
    clean = items.body["clean"]
    assert set(clean) == {"é"} and len(clean.encode()) <= ITEM_BUDGET_BYTES
    assert item_size(items.body) <= ITEM_BUDGET_BYTES and items.body["body_truncated"] == 1


def test_missing_optional_fields_get_defaults() -> None:
    bare = {"messageId": "m1@example.com", "threadId": "t1@example.com",
            "processing": {"processedAt": "2024-01-02T03:04:05Z"}}
    items = to_items(bare, "alice")
    m = items.message
    assert (m["from_email"], m["from_name"], m["subject"], m["date"]) == ("", None, None, None)
    assert (m["forai"], m["attachment_count"], m["size_bytes"]) == (None, 0, None)
    assert (m["clean_fallback"], m["spec_version"], m["blob_prefix"]) == (0, "unknown", None)
    assert (m["in_reply_to"], m["x_fields"], m["ts"]) == (None, None, TS)
    assert (items.body["text"], items.body["clean"]) == (None, None)
    assert items.participants == [] and items.references == []


def test_processed_at_falls_back_to_now() -> None:
    now = datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC)
    items = to_items(email(processing={"specVersion": "1.0"}), "alice", now=now)
    assert items.message["processed_at"] == "2025-05-06T07:08:09Z"
    assert items.ts == TS


def test_only_ids_is_rejected_for_lack_of_a_sort_time() -> None:
    with pytest.raises(InvalidEmail, match="timestamp"):
        to_items({"messageId": "m", "threadId": "t"}, "alice")


def test_duplicate_recipients_are_dropped_per_role() -> None:
    to = [{"email": "Alice@Example.com"}, {"email": "alice@example.com", "name": "A"},
          {"name": "No Address"}, {"email": None}, {"email": ""}]
    items = to_items(email(metadata__to=to, metadata__cc=[{"email": "ALICE@example.com"}]),
                     "alice")
    got = [(p["role"], p["email"], p["name"]) for p in items.participants]
    assert got == [("from", "bob@example.com", "Bob Example"),
                   ("to", "alice@example.com", None), ("cc", "alice@example.com", None)]
    assert len({(p["PK"], p["SK"]) for p in items.participants}) == 3


def test_addresses_are_lowercased() -> None:
    items = to_items(email(metadata__bcc=[{"email": "  Dave@EXAMPLE.net "}]), "alice")
    assert items.message["from_email"] == "bob@example.com"
    assert items.participants[-1]["PK"] == "M#alice#A#dave@example.net"
    assert all(p["email"] == p["email"].lower() for p in items.participants)


def test_forai_is_bounded() -> None:
    long = email(content={"forAI": "é" * 10_000})
    assert to_items(long, "alice").message["forai"] == "é" * 8000
    assert to_items(long, "alice", forai_max_chars=100).message["forai"] == "é" * 100


def test_references_are_deduplicated() -> None:
    refs = ["r0@example.com", "r1@example.com", "r0@example.com", ""]
    rows = to_items(email(thread={"references": refs}), "alice").references
    assert [(r["ref_id"], r["position"]) for r in rows] == [("r0@example.com", 0),
                                                           ("r1@example.com", 1)]


def test_extension_fields_blobs_and_size() -> None:
    items = to_items(email(x_label=["work"], **{"x-source": "imap"},
                           attachments=[{"filename": "a.pdf", "size": 3}],
                           content={"rawFull": "é"}), "alice")
    assert json.loads(items.message["x_fields"]) == {"x-source": "imap", "x_label": ["work"]}
    assert items.message["blob_prefix"] == f"aecs/{ALICE}/{MK}/"
    assert (items.message["attachment_count"], items.message["size_bytes"]) == (1, 2)


@pytest.mark.parametrize(("bad", "reason"), [
    ("not a dict", "JSON object"),
    ({"threadId": "t"}, "messageId"),
    ({"messageId": 7, "threadId": "t"}, "messageId"),
    ({"messageId": "m", "threadId": ""}, "threadId"),
    (email(metadata__to="alice@example.com"), "metadata.to"),
    (email(metadata__to=["alice@example.com"]), r"metadata.to\[0\]"),
    (email(metadata__timestamp="yesterday"), "timestamp"),
    (email(metadata__timestamp=-5), "timestamp"),
    (email(metadata__date="last tuesday"), "metadata.date"),
    (email(metadata__timestamp=None, processing__processedAt="soon"), "processedAt"),
    (email(thread__references=[1]), "references"),
    (email(processing__cleanFallback="yes"), "cleanFallback"),
    (email(metadata__subject=42), "subject"),
    (email(messageId="bad\ud800"), "surrogate"),
])
def test_bad_input_is_rejected_with_a_reason(bad: Any, reason: str) -> None:
    with pytest.raises(InvalidEmail, match=reason):
        to_items(bad, "alice")


def test_thread_summary_does_not_depend_on_arrival_order() -> None:
    def update(ts: int, key: str, subject: str) -> ThreadUpdate:
        return ThreadUpdate("pk", "tk", "tid", subject, ts, key, "alice")

    a, b = update(10, "a" * 64, "first"), update(30, "b" * 64, "Re: last")
    c = update(20, "c" * 64, "Re: mid")
    forward = thread_after_insert(thread_after_insert(thread_after_insert(None, a), b), c)
    backward = thread_after_insert(thread_after_insert(thread_after_insert(None, c), b), a)
    assert forward == backward == {
        "thread_id": "tid", "subject": "first", "first_ts": 10, "last_ts": 30,
        "message_count": 3, "last_message_key": "b" * 64,
        "GSI2PK": "M#alice#THREADS", "GSI2SK": "000000000030#tk",
    }
    rows = [{"ts": 20, "subject": "Re: mid", "message_key": "c" * 64, "thread_id": "tid"},
            {"ts": 30, "subject": "Re: last", "message_key": "b" * 64, "thread_id": "tid"}]
    assert thread_summary("alice", "tk", rows) == {
        "thread_id": "tid", "subject": "Re: mid", "first_ts": 20, "last_ts": 30,
        "message_count": 2, "last_message_key": "b" * 64,
        "GSI2PK": "M#alice#THREADS", "GSI2SK": "000000000030#tk",
    }
    assert thread_summary("alice", "tk", []) is None
