"""DynamoDB adapter: consistent reads of a message's current items, and the sidecar's own table.

The sidecar's table (``<table>-sidecar``) keeps what the mail table cannot answer by message
key — the participants of a message, one item each (``indexer.adapters.dynamodb.participants``) —
plus
the tailer's checkpoints and leases. Reads of the mail
table are strongly consistent: the planner's "re-read, write, re-read" relies on it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from indexer.adapters.aws.io import (
    Key,
    batch_delete,
    batch_get,
    items,
    pages,
    plain,
)
from indexer.adapters.dynamodb.participants import ParticipantStore, StagedParticipants
from indexer.adapters.dynamodb.tables import INIT_HINT, MAIL_HINT, Needed, require
from indexer.core.documents import MessageState, Participant
from indexer.core.errors import RecordError
from indexer.core.items import ItemKind, classify, message_pk, message_sk, thread_pk
from indexer.core.plan import (
    BODY_WANTED,
    KNOWN_KEYS,
    MAIL_READ_CONSISTENT,
    MessageRef,
    ParticipantRef,
)

PURGE_SCAN_SEGMENTS = 4
"""Segments of a purge's parallel Scan of the sidecar's table (each its own thread; botocore's
pool holds 10 connections)."""


class DynamoStore:
    """Reads of the mail table and reads/writes of the sidecar's table."""

    def __init__(self, client: Any, table: str, state_table: str) -> None:
        self._client = client
        self._table = table
        self._state = state_table
        self._people = ParticipantStore(client, state_table)

    # -- mail table ---------------------------------------------------------------------------
    def get_items(
        self, keys: Iterable[Key], *, consistent: bool = True
    ) -> dict[Key, dict[str, Any]]:
        """BatchGetItem of many keys, following UnprocessedKeys; strongly consistent unless
        ``consistent`` is off (the API's join, which re-reads its misses strongly)."""
        return {
            (item["PK"]["S"], item["SK"]["S"]): plain(item)
            for item in batch_get(
                self._client, self._table, sorted(set(keys)), consistent=consistent
            )
        }

    def read_states(
        self, refs: Collection[MessageRef], *, participants: bool
    ) -> dict[MessageRef, MessageState]:
        """Each message's current Message, Body (and participants), or ``message=None``; the
        Body is not read (``body=None``) while :data:`~indexer.core.plan.BODY_WANTED` is off,
        META not for the messages of :data:`~indexer.core.plan.KNOWN_KEYS` (a verify read),
        and the mail items eventually consistent while
        :data:`~indexer.core.plan.MAIL_READ_CONSISTENT` is off (a replay's first read; the
        participant store is always read strongly: a backfill's first pass just wrote it)."""
        body_sk = ("BODY",) if BODY_WANTED.get() else ()
        consistent = MAIL_READ_CONSISTENT.get()
        known = KNOWN_KEYS.get() or {}
        located: dict[MessageRef, Key] = {
            r: (thread_pk(r.mailbox_id, known[r][0]), message_sk(known[r][1], r.message_key))
            for r in refs if r in known
        }
        first = self.get_items(
            [(message_pk(r.mailbox_id, r.message_key), sk) for r in refs
             for sk in (*body_sk, *(() if r in located else ("META",)))]
            + list(located.values()),
            consistent=consistent,
        )
        message_keys: dict[MessageRef, Key] = {}
        for ref in refs:
            meta = first.get((message_pk(ref.mailbox_id, ref.message_key), "META"))
            if meta is not None:
                thread_key, ts = str(meta["thread_key"]), int(meta["ts"])
                message_keys[ref] = (
                    thread_pk(ref.mailbox_id, thread_key),
                    message_sk(ts, ref.message_key),
                )
        messages = self.get_items(message_keys.values(), consistent=consistent)
        found = {ref: messages.get(key) for ref, key in message_keys.items()}
        found.update({ref: first[key] for ref, key in located.items() if key in first})
        lost = [ref for ref in located if ref not in found]
        if lost:  # gone, or stored again under another key: the full read decides
            token = KNOWN_KEYS.set(None)
            try:
                again = self.read_states(lost, participants=participants)
            finally:
                KNOWN_KEYS.reset(token)
        else:
            again = {}
        people = self._people.of_many(
            [ref for ref, message in found.items() if participants and message])
        states: dict[MessageRef, MessageState] = dict(again)
        for ref in refs:
            if ref in again:
                continue
            message = found.get(ref)
            body = first.get((message_pk(ref.mailbox_id, ref.message_key), "BODY"))
            states[ref] = MessageState(ref, message, body if message else None,
                                       people.get(ref, ()))
        return states

    def _paged(self, operation: str, **kwargs: Any) -> Iterator[list[dict[str, Any]]]:
        """Pages of a Query or Scan as plain items (one paged helper: ``dynamo_io.pages``)."""
        for page in pages(self._client, operation, **kwargs):
            yield [plain(raw) for raw in page["Items"]]

    def mailbox_pages(self, mailbox_id: str, limit: int | None = None) -> Iterator[list[Any]]:
        """A mailbox's Message items, page by page (GSI1: eventually consistent)."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": "GSI1",
            "KeyConditionExpression": "GSI1PK = :pk",
            "ExpressionAttributeValues": {":pk": {"S": f"M#{mailbox_id}"}},
        }
        if limit is not None:
            kwargs["Limit"] = limit
        return self._paged("query", **kwargs)

    def mailbox_ids(self) -> set[str]:
        """Every mailbox holding a message (a keys-only Scan of GSI1)."""
        found: set[str] = set()
        listed = self._paged(
            "scan",
            TableName=self._table,
            IndexName="GSI1",
            ProjectionExpression="GSI1PK",
        )
        for page in listed:
            found |= {str(i["GSI1PK"]).removeprefix("M#") for i in page if "GSI1PK" in i}
        return found

    def delete_participants_of_mailbox(self, mailbox_id: str) -> int:
        """Remove the sidecar's participant items of a mailbox (``P#<mailbox>#...``).

        Their keys start with the mailbox but each is its own partition, so they are found by
        a Scan of the sidecar's table: :data:`PURGE_SCAN_SEGMENTS` segments side by side
        (DynamoDB's parallel scan), each deleting what it finds 25 keys per
        ``BatchWriteItem`` as it goes — a whale's 100,000 items in 4,000 calls, not 100,000
        ``DeleteItem`` s one after another. The Scan still reads the whole table, a cost that
        grows with every mailbox's messages (docs/operations/purge.md)."""
        def segment(n: int) -> int:
            listed = self._paged(
                "scan", TableName=self._state, ProjectionExpression="PK, SK",
                FilterExpression="begins_with(PK, :p)",
                ExpressionAttributeValues={":p": {"S": f"P#{mailbox_id}#"}},
                ConsistentRead=True, Segment=n, TotalSegments=PURGE_SCAN_SEGMENTS)
            return sum(batch_delete(self._client, self._state,
                                    [(item["PK"], item["SK"]) for item in page])
                       for page in listed)

        with ThreadPoolExecutor(max_workers=PURGE_SCAN_SEGMENTS) as pool:
            return sum(pool.map(segment, range(PURGE_SCAN_SEGMENTS)))

    # -- sidecar table: participants (see indexer.adapters.dynamodb.participants) ------------------
    def participants_of(self, ref: MessageRef) -> tuple[Participant, ...]:
        """The participants the sidecar has seen for a message (strongly consistent)."""
        return self._people.of_many([ref])[ref]

    def stage_participants(self, refs: Collection[ParticipantRef]) -> StagedParticipants:
        """Read what the participant store must hold for these mail-table participant items
        (one strongly consistent read of each, and of their messages' PEOPLE items); the
        writes wait for :meth:`StagedParticipants.commit`, so a caller can run them beside
        its own (:func:`indexer.pipeline.sync.sync_fulltext` runs them beside the bulk).

        Why no verify re-read (it was over half of a message's read units, issue 28): a
        participant item is put in its message's transaction and deleted with it, never
        rewritten in place by the writer, so the item read here can only later disappear —
        and its deletion is a REMOVE record of its own, whose sync reads after it and removes
        the attribute. A rename made in place by hand is likewise a MODIFY record of its own.
        The one race left: a sync that read the item before its message was deleted and writes
        after the REMOVE's sync leaves an attribute on the PEOPLE item of a message that no
        longer exists; no document shows it (a gone message has none), the verify re-read
        used to remove it.
        """
        pending = set(refs)
        current = self.get_items((r.pk, r.sk) for r in pending)
        return self._people.stage(pending, current)

    def sync_participants(self, refs: Collection[ParticipantRef]) -> None:
        """Make the participant store match the mail table for these items now (read, then
        write): :meth:`stage_participants` committed at once."""
        self.stage_participants(refs).commit()

    def describe(self) -> None:
        """Readiness probe: both tables exist and answer (:class:`MissingTableError` names a
        missing one and the command that creates it)."""
        require(self._client, [Needed(self._table, MAIL_HINT), Needed(self._state, INIT_HINT)])


def message_items(ddb: Any, table: str, extra: str = "") -> Iterator[tuple[MessageRef, Any]]:
    """Every Message item of the table (keys, plus ``extra`` attributes, raw DynamoDB JSON):
    a strongly consistent, paged Scan (reindex, vectors reindex, reconcile's table side)."""
    rows = items(
        ddb,
        "scan",
        TableName=table,
        ProjectionExpression="PK, SK" + (f", {extra}" if extra else ""),
        FilterExpression="begins_with(SK, :m)",
        ExpressionAttributeValues={":m": {"S": "MSG#"}},
        ConsistentRead=True,
    )
    for item in rows:
        try:
            ref = classify(item["PK"]["S"], item["SK"]["S"])
        except RecordError:
            continue  # not an item of the mail layout: nothing to index
        if ref.kind is ItemKind.MESSAGE and ref.message_key:
            yield MessageRef(ref.mailbox_id, ref.message_key), item
