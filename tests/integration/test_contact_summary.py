"""The contact summary converges to the message index under concurrent full-text batches:
batches of different messages that share an address, applied at once by several sinks
(as several workers would), then deletes at once; every contact then holds exactly the
figures a count of the index gives, and an address no message holds any more has none —
whether each sink recounts inline (after waiting for its batch to be searchable) or defers
its recounts (as a worker does: ``sidecar.contacts`` tasks, run here at once, concurrently,
each through its JSON, after every batch was applied).

Shown to catch what it claims: with the sink's wait for its writes to be searchable taken out
(and the verify round), it failed 3 runs of 3 (the list's count 10 of 30, or no contact at
all). The verify round guards a rarer order (a stale count written after a fresh one), which
this test does not force."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.core.contacts import contact_id
from indexer.core.documents import MessageState, Participant, search_document
from indexer.core.plan import MessageRef
from indexer.pipeline.contacts_sync import KeptSink, Recount, keeper, recount
from indexer.settings import Settings
from sidecar_tools.writer.mapping import to_items
from tests.support.api_fixtures import mail
from tests.support.pipeline_helpers import prepare_tables

pytestmark = [pytest.mark.stack]

BOX = "summary-box"
LIST = "list@lists.example"


def _document(n: int) -> tuple[MessageRef, dict[str, Any]]:
    """Message ``n``: from the list, to one of five people, on day ``n`` (1–28)."""
    email = mail(n, f"note {n}", "A note.", sender=("The List", LIST),
                 to=[f"p{n % 5}@people.example"], day=1 + n % 28)
    items = to_items(email, BOX)
    people = tuple(Participant(p["role"], p["email"], p.get("name"))
                   for p in items.participants)
    state = MessageState(MessageRef(BOX, items.message_key), items.message, items.body, people)
    doc = search_document(state)
    assert doc is not None
    return state.ref, doc


def _summary(settings: Settings) -> dict[str, dict[str, Any]]:
    index = keeper(settings).index
    index.refresh()
    body = {"size": 100, "query": {"term": {"mailbox_id": BOX}}}
    found = index.client.search(index=index.name, body=body, routing=BOX)["hits"]["hits"]
    return {h["_source"]["email"]: h["_source"] for h in found}


@pytest.mark.parametrize("deferred", [False, True], ids=["inline", "deferred"])
def test_concurrent_batches_and_deletes_converge(settings: Settings, deferred: bool) -> None:
    prepare_tables(settings)
    kept = keeper(settings)
    docs = dict(_document(n) for n in range(40))
    refs = list(docs)
    queued: list[dict[str, Any]] = []  # the deferred recounts, as their tasks carry them
    sinks = [KeptSink(factories.fulltext_index(settings), kept,  # 4 workers
                      (lambda rc: queued.append(rc.to_json())) if deferred else None)
             for _ in range(4)]

    def apply(job: tuple[int, dict[MessageRef, Any]]) -> dict[MessageRef, str]:
        return sinks[job[0] % len(sinks)].apply(job[1])

    with ThreadPoolExecutor(8) as pool:
        writes = [(i, {r: docs[r] for r in refs[i::8]}) for i in range(8)]
        assert not any(pool.map(apply, writes))
        gone = refs[::5] + refs[1:3]  # every message to p0, and two more
        deletes = [(i, dict.fromkeys(gone[i::5])) for i in range(5)]
        assert not any(pool.map(apply, deletes))
        if deferred:
            assert not _summary(settings)  # nothing counted by the batches themselves
            assert len(queued) == 13  # one per batch (one mailbox each)
            list(pool.map(lambda raw: recount(kept, [Recount.from_json(raw)]), queued))

    summary = _summary(settings)
    addresses = {LIST} | {f"p{k}@people.example" for k in range(5)}
    truth = kept.index.tallies(BOX, addresses)
    for email in addresses:
        t = truth[email]
        if not t.messages:
            assert email not in summary, email
            continue
        assert (summary[email]["messages"], summary[email]["last_ts"],
                summary[email]["last_key"]) == (t.messages, t.last_ts, t.last_key), email
    assert summary[LIST]["messages"] == 30
    assert "p0@people.example" not in summary  # every message to p0 was deleted
    left = [docs[r] for r in refs if r not in gone]
    assert summary[LIST]["last_ts"] == max(int(d["ts"]) for d in left)
    # The ids are digests: neither the mailbox nor the address is a key.
    assert contact_id(BOX, LIST) not in (BOX, LIST) and len(contact_id(BOX, LIST)) == 64
