"""The sidecar's participant store against moto: one item per message, batch reads.

The writer's own participant items are written straight into a mail table here (the shape of
``store-items.md``), then synced; no other part of the pipeline is involved.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from indexer.adapters import factories
from indexer.adapters.dynamodb.participants import SK, item_pk
from indexer.adapters.dynamodb.tables import init_tables
from indexer.core.documents import Participant
from indexer.core.plan import MessageRef, ParticipantRef
from indexer.settings import Settings

pytestmark = pytest.mark.stack


def _put(ddb: Any, settings: Settings, ref: ParticipantRef, email: str, name: str | None) -> None:
    item = {"PK": {"S": ref.pk}, "SK": {"S": ref.sk}, "email": {"S": email},
            "role": {"S": ref.sk.rsplit("#", 1)[-1]}}
    item["name"] = {"S": name} if name is not None else {"NULL": True}
    ddb.put_item(TableName=settings.table, Item=item)


def _ref(message: MessageRef, email: str, role: str) -> ParticipantRef:
    return ParticipantRef(
        message, f"M#{message.mailbox_id}#A#{email}", f"000000000001#{message.message_key}#{role}"
    )


@pytest.fixture
def store(settings: Settings, ddb: Any) -> Any:
    init_tables(ddb, settings, mail_table=True)
    return factories.store(settings)


def test_sync_read_and_remove(store: Any, ddb: Any, settings: Settings) -> None:
    message = MessageRef("box@x.org", "k1")
    sender = _ref(message, "a@x.org", "from")
    to = _ref(message, "b@x.org", "to")
    _put(ddb, settings, sender, "a@x.org", "Ann")
    _put(ddb, settings, to, "b@x.org", None)
    store.sync_participants([sender, to])
    assert store.participants_of(message) == (
        Participant("from", "a@x.org", "Ann"), Participant("to", "b@x.org", None))

    ddb.delete_item(TableName=settings.table, Key={"PK": {"S": to.pk}, "SK": {"S": to.sk}})
    store.sync_participants([to])
    assert store.participants_of(message) == (Participant("from", "a@x.org", "Ann"),)

    raw = ddb.get_item(TableName=settings.resolved_state_table,
                       Key={"PK": {"S": item_pk(message)}, "SK": {"S": SK}})["Item"]
    assert not any("@" in name for name in raw), "an address became an attribute name"


def test_concurrent_syncs_of_one_message_keep_each_other(
    store: Any, ddb: Any, settings: Settings
) -> None:
    message = MessageRef("box@x.org", "k2")
    refs = [_ref(message, f"p{n}@x.org", "cc") for n in range(24)]
    for ref in refs:
        _put(ddb, settings, ref, ref.pk.rsplit("#", 1)[-1], None)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda ref: store.sync_participants([ref]), refs))
    assert {p.email for p in store.participants_of(message)} == {f"p{n}@x.org" for n in range(24)}


def test_removal_of_an_unknown_message_creates_nothing(store: Any, ddb: Any,
                                                       settings: Settings) -> None:
    gone = _ref(MessageRef("box@x.org", "never-stored"), "z@x.org", "to")
    store.sync_participants([gone])
    page = ddb.scan(TableName=settings.resolved_state_table, ConsistentRead=True)
    assert page["Items"] == []


def test_read_states_joins_people_of_more_than_one_batch(store: Any, ddb: Any,
                                                        settings: Settings) -> None:
    """250 messages: the participant reads page over BatchGetItem's 100 keys."""
    messages = [MessageRef("box@x.org", f"m{n:03d}") for n in range(250)]
    refs = [_ref(m, f"{m.message_key}@x.org", "from") for m in messages]
    for ref in refs:
        _put(ddb, settings, ref, ref.pk.rsplit("#", 1)[-1], None)
    store.sync_participants(refs)
    people = store._people.of_many(messages)
    assert {m: [p.email for p in people[m]] for m in messages} == {
        m: [f"{m.message_key}@x.org"] for m in messages}


def test_unchanged_participants_are_not_written_again(store: Any, ddb: Any,
                                                      settings: Settings) -> None:
    """A replay of participants the store already holds reads, but writes nothing."""
    messages = [MessageRef("box@x.org", f"r{n}") for n in range(5)]
    refs = [_ref(m, f"{m.message_key}@x.org", "to") for m in messages]
    for ref in refs:
        _put(ddb, settings, ref, ref.pk.rsplit("#", 1)[-1], "Name")
    updates: list[str] = []
    client = store._client  # the store's own (real) client: count the calls it makes
    client.meta.events.register("provide-client-params.dynamodb.UpdateItem",
                                lambda **kw: updates.append(kw["params"]["Key"]["PK"]["S"]))
    store.sync_participants(refs)
    assert len(updates) == 5
    store.sync_participants(refs)
    assert len(updates) == 5, "an unchanged participant was written again"
    ddb.put_item(TableName=settings.table, Item={
        "PK": {"S": refs[0].pk}, "SK": {"S": refs[0].sk}, "email": {"S": "r0@x.org"},
        "role": {"S": "to"}, "name": {"S": "Renamed"}})
    store.sync_participants(refs)
    assert updates[5:] == ["P#box@x.org#r0"]
    assert store.participants_of(messages[0]) == (Participant("to", "r0@x.org", "Renamed"),)
