"""Contacts and "did you mean" on the real stack: both are built from the caller's own
mailbox only (invariant 6), over two mailboxes indexed by the real pipeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.opensearch.contacts import ContactsIndex
from indexer.settings import to_env
from sidecar_tools.writer.store import delete_message
from tests.conftest import _drop_indices, namespaced
from tests.support.api_fixtures import TOKEN_A, TOKEN_B, Api, index_all, mail, start_api, store_all

pytestmark = [pytest.mark.stack, pytest.mark.slow]

RALF = ("Ralf Baechle", "ralf@linux-mips.org")
RAY = ("Raymond Chen", "rchen@microsoft.example")


def _mail(n: int, subject: str, body: str, *, sender: tuple[str, str],
          to: list[tuple[str | None, str]], cc: Sequence[tuple[str | None, str]] = (),
          bcc: Sequence[tuple[str | None, str]] = (), day: int = 1) -> dict[str, Any]:
    """A message whose recipients carry names (the fixture's ``mail`` leaves them out)."""
    email = mail(n, subject, body, sender=sender, to=[], day=day)
    meta = email["metadata"]
    meta["to"] = [{"name": name, "email": a} for name, a in to]
    meta["cc"] = [{"name": name, "email": a} for name, a in cc]
    meta["bcc"] = [{"name": name, "email": a} for name, a in bcc]
    return email


OWNER = ("Owner", "owner@home.example")
MAILBOX_A = [
    _mail(1, "MIPS kernel patch", "The kernel patch for the timer driver is attached.",
          sender=RALF, to=[OWNER], cc=[RAY], bcc=[("Rasmus Secret", "rasmus@secret.example")],
          day=1),
    _mail(2, "Re: MIPS kernel patch", "I will receive the kernel tree tomorrow and apply it.",
          sender=OWNER, to=[RALF], day=2),
    _mail(3, "kernel timer question", "Does the kernel timer receive interrupts early?",
          sender=RALF, to=[OWNER], day=3),
    _mail(4, "Your build", "The build of the kernel finished.",
          sender=("GitHub", "noreply@github.com"), to=[OWNER], day=4),
    _mail(5, "Film night", "Tickets for the film night are booked.",
          sender=OWNER,
          to=[("Quentin Tarantino", "qt@films.example"), (None, "zed@films.example")], day=5),
    _mail(6, "Lists", "Weekly digest of the kernel lists.",
          sender=("Lists", "digest@lists.gitlab.example"), to=[OWNER], day=6),
]
MAILBOX_B = [
    _mail(100, "Trip to Lisbon", "Our hotel in Lisbon is booked; Lisbon in May.",
          sender=("Ranjit Other", "ranjit@other.example"), to=[("Bea", "bea@other.example")],
          day=1),
    _mail(101, "Lisbon photos", "Photos of Lisbon attached.",
          sender=("Ranjit Other", "ranjit@other.example"), to=[("Bea", "bea@other.example")],
          day=2),
]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    unique = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("suggest")
    settings = namespaced("suggest", tmp, unique)
    for running in start_api(settings, tmp, f"a-{unique}", f"b-{unique}"):
        store_all(settings, running.mailbox_a, MAILBOX_A)
        store_all(settings, running.mailbox_b, MAILBOX_B)
        index_all(settings, tmp)
        yield running
    _drop_indices(settings, settings.opensearch_index)


def contacts(api: Api, prefix: str, token: str | None = None, mailbox: str | None = None,
             **params: Any) -> list[dict[str, Any]]:
    response = api.get(f"/v1/mailboxes/{mailbox or api.mailbox_a}/contacts",
                       *([token] if token else []), prefix=prefix, **params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["contacts"]
    return found


def emails(found: list[dict[str, Any]]) -> list[str]:
    return [c["email"] for c in found]


def test_contacts_by_address_prefix_ranked_with_names(api: Api) -> None:
    found = contacts(api, "ra")
    # Ralf: From of 2 messages and To of 1; Raymond (a name word): Cc of one; Rasmus only
    # ever Bcc.
    assert emails(found) == ["ralf@linux-mips.org", "rchen@microsoft.example"]
    assert found[0] == {"email": "ralf@linux-mips.org", "name": "Ralf Baechle",
                        "messages": 3, "last_ts": found[0]["last_ts"]}
    assert found[0]["last_ts"] == MAILBOX_A[2]["metadata"]["timestamp"]
    assert emails(contacts(api, "rc")) == ["rchen@microsoft.example"]
    assert contacts(api, "rc")[0]["name"] == "Raymond Chen"  # a Cc's name, from the table
    assert emails(contacts(api, "RAL")) == ["ralf@linux-mips.org"]  # any case
    assert emails(contacts(api, "ra", limit=1)) == ["ralf@linux-mips.org"]


def test_contacts_by_domain_and_domain_label(api: Api) -> None:
    assert emails(contacts(api, "linux-m")) == ["ralf@linux-mips.org"]
    assert emails(contacts(api, "github.c")) == ["noreply@github.com"]
    assert emails(contacts(api, "gitlab")) == ["digest@lists.gitlab.example"]
    assert emails(contacts(api, "hub")) == []  # no infix
    assert set(emails(contacts(api, "films"))) == {"qt@films.example", "zed@films.example"}


def test_contacts_by_name_word(api: Api) -> None:
    assert emails(contacts(api, "baech")) == ["ralf@linux-mips.org"]
    assert emails(contacts(api, "raymond")) == ["rchen@microsoft.example"]
    # A To name: the index keeps To names unpaired; zed@ shares the message, not the name.
    assert contacts(api, "taran") == [{
        "email": "qt@films.example", "name": "Quentin Tarantino", "messages": 1,
        "last_ts": MAILBOX_A[4]["metadata"]["timestamp"]}]
    assert emails(contacts(api, "ralf baech")) == ["ralf@linux-mips.org"]
    assert emails(contacts(api, "ralf chen")) == []


def test_contacts_never_bcc_nor_another_mailbox(api: Api) -> None:
    assert contacts(api, "rasm") == [] and contacts(api, "secret") == []
    assert contacts(api, "ranj") == [] and contacts(api, "other.ex") == []
    assert emails(contacts(api, "ranj", TOKEN_B, api.mailbox_b)) == ["ranjit@other.example"]


def test_contacts_limit_order_auth_and_bad_input(api: Api) -> None:
    ranked = emails(contacts(api, "o"))  # owner: in every message
    assert ranked[0] == "owner@home.example"
    assert emails(contacts(api, "o", limit=1)) == ranked[:1]
    path = f"/v1/mailboxes/{api.mailbox_b}/contacts"
    assert api.get(path, prefix="ra").status_code == 403  # token A, mailbox B
    assert api.get(path, None, prefix="ra").status_code == 401
    own = f"/v1/mailboxes/{api.mailbox_a}/contacts"
    for bad in ({"prefix": ""}, {"prefix": "x" * 101}, {"prefix": "a", "limit": 0}, {}):
        answer = api.get(own, **bad)
        assert answer.status_code == 400, (bad, answer.text)
    for hostile in ('.*', 'a|b', '[', '\\', 'a"b', "@", "*", "((", "a@b.c"):
        answer = api.get(own, prefix=hostile)
        assert answer.status_code == 200, (hostile, answer.text)
    assert emails(contacts(api, ".*")) == [] and emails(contacts(api, "@")) == []


def test_contacts_follow_a_delete_and_a_rebuild_restores_them(api: Api, tmp_path: Path) -> None:
    settings, box = api.settings, api.mailbox_b
    note = _mail(102, "Hello", "A passing note.", sender=("Tempo Person", "tempo@gone.example"),
                 to=[("Bea", "bea@other.example")], day=3)
    store_all(settings, box, [note])
    index_all(settings, tmp_path)
    ts = note["metadata"]["timestamp"]
    assert contacts(api, "tempo", TOKEN_B, box) == [
        {"email": "tempo@gone.example", "name": "Tempo Person", "messages": 1, "last_ts": ts}]
    assert contacts(api, "bea", TOKEN_B, box)[0]["messages"] == 3
    # Deleted from the store: the workers delete its document and recount its addresses.
    assert delete_message(aws.client(settings, "dynamodb"), settings.table, box,
                          note["messageId"])
    index_all(settings, tmp_path)
    assert contacts(api, "tempo", TOKEN_B, box) == []
    bea = contacts(api, "bea", TOKEN_B, box)[0]
    assert (bea["messages"], bea["last_ts"]) == (2, MAILBOX_B[1]["metadata"]["timestamp"])

    # The summary of mailbox A lost, then rebuilt from the message index by the CLI.
    prefixes = ("ra", "o", "films", "gitlab", "taran", "baech")
    before = {p: contacts(api, p) for p in prefixes}
    summary = ContactsIndex(factories.fulltext_index(settings))
    assert summary.delete_mailbox(api.mailbox_a) > 0
    assert contacts(api, "ra") == []
    rebuilt = subprocess.run(
        [sys.executable, "-m", "indexer.cli.main", "contacts-rebuild", "--mailbox",
         api.mailbox_a], env={**os.environ, **to_env(settings)}, capture_output=True,
        text=True, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["contacts"] == 7  # its From/To/Cc addresses (no Bcc)
    summary.refresh()
    assert {p: contacts(api, p) for p in prefixes} == before


def _matching(mails: list[dict[str, Any]], word: str) -> int:
    return sum(word in (m["metadata"]["subject"] + " " + m["content"]["clean"]).lower()
               for m in mails)


def suggestion(api: Api, q: str, token: str | None = None, mailbox: str | None = None,
               **params: Any) -> Any:
    response = api.search(q, token or TOKEN_A, mailbox, **params)
    assert response.status_code == 200, response.text
    body = response.json()
    assert "did_you_mean" in body, body
    return body["did_you_mean"]


def test_did_you_mean_corrects_from_the_mailbox_words(api: Api) -> None:
    assert suggestion(api, "kernal") == {"q": "kernel", "hits": _matching(MAILBOX_A, "kernel")}
    assert suggestion(api, "Kernal") == {"q": "Kernel", "hits": _matching(MAILBOX_A, "kernel")}
    # a transposition beside a known word; the query keeps its operators
    assert suggestion(api, "recieve timer") == {"q": "receive timer", "hits": 1}
    assert suggestion(api, "from:ralf recieve") == {"q": "from:ralf receive", "hits": 1}
    assert suggestion(api, "kernal", mode="hybrid")["q"] == "kernel"
    # two edits (a word of six letters or more): the fuzzy sample's candidates
    assert suggestion(api, "kurnal") == {"q": "kernel", "hits": _matching(MAILBOX_A, "kernel")}
    assert suggestion(api, "kernel") is None  # nothing better than what was typed
    assert suggestion(api, "zzzzqqq") is None  # nothing near it


def test_did_you_mean_never_offers_another_mailboxs_word(api: Api) -> None:
    # "lisbon" is in mailbox B only: however close, A is never told of it...
    assert suggestion(api, "lisbonn") is None
    assert suggestion(api, "Lisbom") is None
    # ...while B, which holds it, is (the word is in the shard the whole time).
    assert suggestion(api, "lisbonn", TOKEN_B, api.mailbox_b) == {
        "q": "lisbon", "hits": _matching(MAILBOX_B, "lisbon")}


def test_did_you_mean_left_out_on_semantic_and_later_pages(api: Api) -> None:
    semantic = api.search("kernal", mode="semantic")
    assert semantic.status_code == 200 and "did_you_mean" not in semantic.json()
    first = api.search("kernel", limit=1).json()
    assert first["did_you_mean"] is None and first["next_cursor"]
    later = api.search("kernel", limit=1, cursor=first["next_cursor"]).json()
    assert "did_you_mean" not in later
