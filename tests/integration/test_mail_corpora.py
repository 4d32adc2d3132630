"""RFC 5322 -> NormalizedEmail on real mail: the shipped corpora rebuilt as messages and read
back, and the ``clean`` rules against the corpora's own ``clean`` (hundreds of messages each,
seconds: kept out of the unit tier; ``tests/unit/test_mail_convert.py`` has the hand-made
cases)."""

from __future__ import annotations

import pytest

from sidecar_tools.mailimport.convert import to_normalized
from sidecar_tools.mailimport.text import clean_text
from sidecar_tools.writer.mapping import to_items
from tests.conftest import CORPORA
from tests.support.mail_helpers import corpus, to_message

NOW = "2026-12-01T00:00:00Z"


def _words(text: str | None) -> str:
    return " ".join((text or "").split())


@pytest.mark.parametrize("name", ["notmuch-lkml.jsonl.gz", "linux-mips-4k.jsonl.gz"])
def test_real_mail_fields_survive_the_round_trip(name: str) -> None:
    emails = corpus(CORPORA / name)[:400]
    for email in emails:
        got = to_normalized(to_message(email).as_bytes(), NOW)
        meta, want = got["metadata"], email["metadata"]
        assert got["messageId"] == email["messageId"]
        assert got["threadId"] == email["threadId"]  # References[0], else In-Reply-To, else own
        assert got["thread"]["references"] == email["thread"]["references"]
        assert meta["subject"] == (_words(want["subject"]) or None)
        assert (meta["timestamp"], meta["date"]) == (want["timestamp"], want["date"])
        assert meta["from"]["email"].lower() == want["from"]["email"].lower()
        assert [a["email"] for a in meta["to"]] == [a["email"] for a in want["to"]]
        assert _words(got["content"]["text"]) == _words(email["content"]["text"])
        assert len(got["attachments"]) == len(email["attachments"])
        to_items(got, "me")  # the store writer accepts every one


def test_clean_agrees_with_the_corpus_conversion() -> None:
    """Quotes, attributions, top-posted chains and signatures go as in the corpora (≥ 90 %
    identical word for word; the rest differ in an attribution line kept or dropped)."""
    emails = corpus(CORPORA / "linux-mips-4k.jsonl.gz")[:600]
    same = sum(
        _words(clean_text(e["content"]["text"] or "")[0]) == _words(e["content"]["clean"])
        for e in emails
    )
    assert same / len(emails) >= 0.9, same
