"""The sidecar's participant store: one item per message, read in batches.

Why it exists: the mail table keys participant items by address (``M#<M>#A#<email>``), so
"who took part in message K" has no key there. The sidecar keeps that answer itself, in its
state table, as **one item per message** — ``PK = P#<mailbox>#<message_key>``, ``SK = PEOPLE``
— with one attribute per participant item of the mail table. Why one item and not one item per
participant: the full-text path reads the participants of every message of a batch twice
(read, then verify), and one item per message makes that one ``BatchGetItem`` of 100 keys
instead of one ``Query`` per message; it was the pipeline's largest cost.

Each participant attribute is named ``p_<hash of the mail item's key>`` (email content never
becomes an attribute name) and holds ``{role, email, name}``. Writes are ``UpdateItem``
``SET``/``REMOVE`` of single attributes, so two workers syncing different participants of one
message never overwrite each other; a message's updates are one request. An item is limited to
400 KB by DynamoDB, about 2,000 participants; a larger message fails its update with
DynamoDB's ``ValidationException`` and is dead-lettered with that reason.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from indexer.adapters.aws.io import Key, batch_get, classify_error
from indexer.core.documents import Participant
from indexer.core.plan import MessageRef, ParticipantRef

SK = "PEOPLE"
WRITERS = 8  # concurrent UpdateItem calls per batch (botocore pools 10 connections)
_DESER = TypeDeserializer()
_SER = TypeSerializer()



def item_pk(ref: MessageRef) -> str:
    """The state-table partition key of a message's participant item."""
    return f"P#{ref.mailbox_id}#{ref.message_key}"


def attribute_name(ref: ParticipantRef) -> str:
    """A fixed-size attribute name for one mail-table participant item (a hash of its key)."""
    digest = hashlib.sha256(f"{ref.pk}\x00{ref.sk}".encode()).hexdigest()
    return f"p_{digest[:24]}"


def _participant(raw: Mapping[str, Any]) -> Participant:
    value = {k: _DESER.deserialize(v) for k, v in raw.items()}
    name = value.get("name")
    return Participant(str(value["role"]), str(value["email"]), None if name is None else str(name))


def _wanted(ref: ParticipantRef, current: Mapping[Key, Mapping[str, Any]]) -> Any:
    """The attribute value (DynamoDB JSON) the mail item asks for; None: remove it."""
    item = current.get((ref.pk, ref.sk))
    if item is None:
        return None
    return _SER.serialize({
        "role": str(item.get("role") or ref.sk.rsplit("#", 1)[-1]),
        "email": str(item.get("email") or ""),
        "name": None if item.get("name") is None else str(item["name"]),
    })


def _people(attrs: Mapping[str, Any]) -> tuple[Participant, ...]:
    """A PEOPLE item's participant attributes (raw DynamoDB JSON maps), sorted."""
    return tuple(sorted((_participant(v["M"]) for v in attrs.values()),
                        key=lambda p: (p.role, p.email)))


@dataclass(frozen=True)
class StagedParticipants:
    """A participant sync that has read and not yet written: ``projected`` is what each
    touched message's PEOPLE item holds once :meth:`commit` has run.

    Why staged: the full-text document of a new message names its participants, and writing
    the store first put three DynamoDB round trips (read the mail items, read the store, write)
    in front of the document's own reads. Staged, the reads run beside the document's reads and
    the write beside the bulk request; the verify read that follows both still reads the store,
    so a concurrent sync of another participant of the same message is caught as before.
    """

    store: ParticipantStore
    jobs: tuple[tuple[MessageRef, tuple[ParticipantRef, ...]], ...]
    current: Mapping[Key, Mapping[str, Any]]
    projected: Mapping[MessageRef, tuple[Participant, ...]]

    def commit(self) -> None:
        """One ``UpdateItem`` per message whose stored participants differ, ``WRITERS`` at a
        time."""
        if len(self.jobs) <= 1:
            for message, people in self.jobs:
                self.store.update(message, people, self.current)
            return
        with ThreadPoolExecutor(max_workers=min(WRITERS, len(self.jobs))) as pool:
            list(pool.map(lambda job: self.store.update(job[0], job[1], self.current),
                          self.jobs))


class ParticipantStore:
    """Reads and writes of the per-message participant items in the sidecar's table."""

    def __init__(self, client: Any, state_table: str) -> None:
        self._client = client
        self._table = state_table

    def of_many(self, refs: Collection[MessageRef]) -> dict[MessageRef, tuple[Participant, ...]]:
        """Each message's participants, sorted; strongly consistent ``BatchGetItem``s."""
        return {ref: _people(attrs) for ref, attrs in self._stored(refs).items()}

    def stage(
        self, refs: Collection[ParticipantRef], current: Mapping[Key, Mapping[str, Any]]
    ) -> StagedParticipants:
        """Read what the store holds for these participants' messages and plan the writes
        that set (or remove, when the mail item is gone) each participant's attribute.

        Why read first: re-deliveries, replays and backfills mostly bring participants the
        store already holds; one ``BatchGetItem`` per 100 messages then saves their writes.
        """
        by_message: dict[MessageRef, list[ParticipantRef]] = defaultdict(list)
        for ref in refs:
            by_message[ref.message].append(ref)
        stored = self._stored(list(by_message))
        jobs: list[tuple[MessageRef, tuple[ParticipantRef, ...]]] = []
        projected: dict[MessageRef, tuple[Participant, ...]] = {}
        for message, people in by_message.items():
            attrs = dict(stored[message])
            for ref in people:
                wanted = _wanted(ref, current)
                if wanted is None:
                    attrs.pop(attribute_name(ref), None)
                else:
                    attrs[attribute_name(ref)] = wanted
            if attrs != stored[message]:
                jobs.append((message, tuple(people)))
            projected[message] = _people(attrs)
        return StagedParticipants(self, tuple(jobs), current, projected)

    def _stored(self, messages: Collection[MessageRef]) -> dict[MessageRef, dict[str, Any]]:
        """Each message's participant attributes as stored (raw DynamoDB JSON maps)."""
        by_pk = {item_pk(m): m for m in messages}
        found: dict[MessageRef, dict[str, Any]] = {m: {} for m in messages}
        for item in batch_get(self._client, self._table, [(pk, SK) for pk in sorted(by_pk)]):
            found[by_pk[item["PK"]["S"]]] = {k: v for k, v in item.items() if k.startswith("p_")}
        return found

    def update(
        self,
        message: MessageRef,
        people: Collection[ParticipantRef],
        current: Mapping[Key, Mapping[str, Any]],
    ) -> None:
        """One message's ``UpdateItem``: ``SET`` each wanted attribute, ``REMOVE`` the rest."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        sets: list[str] = []
        removes: list[str] = []
        for n, ref in enumerate(sorted(set(people), key=lambda r: (r.pk, r.sk))):
            names[f"#a{n}"] = attribute_name(ref)
            value = _wanted(ref, current)
            if value is None:
                removes.append(f"#a{n}")
                continue
            values[f":v{n}"] = value
            sets.append(f"#a{n} = :v{n}")
        expression = " ".join(
            part
            for part in (
                f"SET {', '.join(sets)}" if sets else "",
                f"REMOVE {', '.join(removes)}" if removes else "",
            )
            if part
        )
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "Key": {"PK": {"S": item_pk(message)}, "SK": {"S": SK}},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
        }
        if values:
            kwargs["ExpressionAttributeValues"] = values
        else:  # removals only: never create an empty item for a message already gone
            kwargs["ConditionExpression"] = "attribute_exists(PK)"
        try:
            self._client.update_item(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise classify_error(exc) from exc
        except BotoCoreError as exc:
            raise classify_error(exc) from exc
