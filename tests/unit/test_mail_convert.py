"""RFC 5322 → NormalizedEmail on hand-made and hostile messages, and the ``clean`` rules on
hand-made cases. The same on the shipped corpora (seconds) is in
``tests/integration/test_mail_corpora.py``."""

from __future__ import annotations

from datetime import datetime

import pytest

from sidecar_tools.mailimport.convert import MalformedMessage, to_normalized
from sidecar_tools.mailimport.text import clean_text, for_ai
from sidecar_tools.writer.mapping import to_items
from tests.support import hostile_mail

NOW = "2026-12-01T00:00:00Z"


def test_clean_keeps_interleaved_answers_and_patches() -> None:
    text = (
        "Hi,\n\nOn Mon, 3 Jan 2011, Bob wrote:\n> quoted\n> more\n\nMy answer.\n\n"
        "Bob <bob@x.org> wrote:\n> again\nSecond answer.\n"
        "diff --git a/x b/x\n-removed line\n+added line\n"
        "Signed-off-by: Al <al@x.org>\nCc: Bob <bob@x.org>\nCc: list@x.org\n\n"
        "Thanks,\nAl\n-- \nAl's signature\n"
    )
    clean, fallback = clean_text(text)
    assert not fallback
    assert clean == (
        "Hi,\n\nMy answer.\n\nSecond answer.\ndiff --git a/x b/x\n-removed line\n+added line\n"
        "Signed-off-by: Al <al@x.org>\nCc: Bob <bob@x.org>\nCc: list@x.org\n\nThanks,\nAl"
    )


@pytest.mark.parametrize(
    "chain",
    [
        "-----Original Message-----\nFrom: Bob\nSent: Monday\nSubject: y\n\nold text",
        "From: Bob Smith <bob@x.org>\nSent: Monday, January 3, 2011 10:00 AM\nTo: Al\n"
        "Subject: Re: thing\n\nold text",
    ],
)
def test_clean_cuts_a_top_posted_chain(chain: str) -> None:
    assert clean_text(f"Top reply.\n\n{chain}\n") == ("Top reply.", False)


def test_clean_falls_back_when_only_quotes() -> None:
    assert clean_text("> all\n> quoted") == ("> all\n> quoted", True)


def test_forai_is_bounded_and_normalised() -> None:
    text = "see [cid:image001.png@01D] here   \n\n\n\n" + "word " * 3000
    out = for_ai(text, 8000)
    assert len(out) <= 8000 and "[image]" in out and "\n\n\n" not in out
    assert out.endswith("word")


def test_hostile_messages_are_read_as_far_as_they_can_be() -> None:
    broken = to_normalized(hostile_mail.broken_mime(), NOW)
    assert "cache flush on the R10000" in broken["content"]["clean"]
    eight = to_normalized(hostile_mail.eight_bit_headers(), NOW)
    assert eight["metadata"]["subject"] == "Réunion café à Paris"
    assert eight["metadata"]["from"] == {"name": "René François", "email": "rene@example.fr"}
    undated = to_normalized(hostile_mail.missing_date(), NOW)
    assert undated["content"]["text"] == "This message has no Date header."
    assert undated["metadata"]["date"] is None and undated["metadata"]["timestamp"] is None
    assert to_items(undated, "me").ts == int(datetime.fromisoformat(NOW).timestamp())
    big = to_normalized(hostile_mail.big_attachment(), NOW)
    assert [(a["filename"], a["size"]) for a in big["attachments"]] == [
        ("huge.log", hostile_mail.TEN_MB)
    ]
    items = to_items(big, "me")
    assert items.message["attachment_count"] == 1
    assert "xxxx" not in str(items.body) and len(str(items.body)) < 1000  # bytes never stored
    nested = to_normalized(hostile_mail.nested_rfc822(), NOW)
    assert [a["contentType"] for a in nested["attachments"]] == ["message/rfc822"]
    assert nested["content"]["clean"] == "See the forwarded mail."
    html = to_normalized(hostile_mail.html_only(), NOW)
    assert html["content"]["text"].startswith("Hotel booking for the conference is confirmed.")
    assert "Room 12" in html["content"]["forAI"]
    assert "alert" not in html["content"]["text"] and "color" not in html["content"]["text"]


@pytest.mark.parametrize("make", list(hostile_mail.MALFORMED.values()))
def test_malformed_messages_raise_with_a_reason(make: object) -> None:
    with pytest.raises(MalformedMessage, match=r"empty file|no header fields"):
        to_normalized(make(), NOW)  # type: ignore[operator]


def test_missing_message_id_gets_a_stable_one() -> None:
    raw = b"From: a@example.org\r\nSubject: no id\r\n\r\nbody\r\n"
    first, again = to_normalized(raw, NOW), to_normalized(raw, "2027-01-01T00:00:00Z")
    assert first["messageId"] == again["messageId"]
    assert first["messageId"].endswith("@import.invalid")
    assert first["threadId"] == first["messageId"]
