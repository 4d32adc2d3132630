"""Keep the contact summary in step with the full-text index, in the batch that moved it.

Every path that writes the full-text index through :func:`indexer.pipeline.sync.sync_fulltext`
(the Celery task, the Lambda handler) gets :func:`fulltext_sink`: the message index with the
summary kept beside it. A batch's contacts are written before the batch is acknowledged, so a
crash or an engine failure retries them with the batch (invariant 3) — no second queue, no
task that could be lost between the two.

Why each batch waits for its writes to be searchable: the figures are counted by searches,
and a search sees a write only after the index's next refresh (500 ms by default). Once a
worker's own writes are visible, its count includes them; a concurrent worker's message is
counted by that worker's own count, taken after its write was visible. Whichever write of a
contact lands last, its writer then reads the figures again and writes again while they
differ — the argument of :mod:`indexer.pipeline.sync` — so the summary converges to the
index. The wait is skipped when no contact can move: a document rewritten with the same
addresses and time (a body re-parsed), or a delete of a message the index did not hold.

Deletes: the addresses a deleted message had are read from its document before the delete
(real-time ``mget``), and a contact whose count falls to zero is deleted. A purge deletes the
mailbox's contacts (:mod:`indexer.ops.purge`); ``sidecar contacts-rebuild`` recomputes a
mailbox's (or every mailbox's) summary from the message index: the migration for an index
filled before the summary existed, and the repair for one a failure left behind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Any

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.participants import ParticipantStore
from indexer.adapters.opensearch.contacts import ContactsIndex
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.core.contacts import Tally, contact_doc, name_in, touched
from indexer.core.errors import TransientError
from indexer.core.plan import MessageRef
from indexer.pipeline.sync import FullTextSink
from indexer.settings import Settings

MAX_ROUNDS = 5
VISIBLE_WAIT_S = 5.0  # past it the read alias is refreshed (an index not refreshing itself)
BEFORE_FIELDS = ("from.address", "to", "cc", "ts")


class ContactsKeeper:
    """Recomputes contacts from the message index and writes them, verified."""

    def __init__(self, index: ContactsIndex, people: ParticipantStore) -> None:
        self.index = index
        self.people = people

    def refresh(self, mailbox: str, emails: Collection[str]) -> int:
        """Make these addresses' contacts match the message index now (written, read again,
        written again while they differ); returns the contact documents written."""
        want = self.index.tallies(mailbox, emails)
        written = 0
        for _ in range(MAX_ROUNDS):
            self._write(mailbox, want)
            written += len(want)
            again = self.index.tallies(mailbox, list(want))
            want = {e: t for e, t in again.items() if t != want[e]}
            if not want:
                return written
        raise TransientError(f"{len(want)} contact(s) kept changing; retry later")

    def _write(self, mailbox: str, tallies: Mapping[str, Tally]) -> None:
        """Each contact's document (its name from its latest message's participant item),
        or its deletion when no message of the mailbox holds the address any more."""
        latest = {MessageRef(mailbox, t.last_key) for t in tallies.values() if t.messages}
        people = self.people.of_many(latest) if latest else {}
        docs: dict[str, dict[str, Any] | None] = {}
        for email, t in tallies.items():
            if not t.messages:
                docs[email] = None
                continue
            name = name_in(people.get(MessageRef(mailbox, t.last_key), ()), email)
            docs[email] = contact_doc(mailbox, email, t, name)
        self.index.write(mailbox, docs)

    def rebuild(self, mailbox: str) -> int:
        """The mailbox's whole summary recomputed: every address its messages hold, and
        every contact the summary holds (those no message holds any more are deleted)."""
        emails = (self.index.emails(mailbox, summary=False)
                  | self.index.emails(mailbox, summary=True))
        return self.refresh(mailbox, emails) if emails else 0


class KeptSink:
    """The full-text sink (:class:`indexer.pipeline.sync.FullTextSink`) with the contact
    summary kept beside it."""

    def __init__(self, messages: OpenSearchIndex, keeper: ContactsKeeper) -> None:
        self.messages = messages
        self.keeper = keeper

    def apply(self, docs: Mapping[MessageRef, Mapping[str, Any] | None]) -> dict[MessageRef, str]:
        before = self.messages.sources(list(docs), BEFORE_FIELDS)
        poison = self.messages.apply(docs)
        visible: dict[MessageRef, bool] = {}
        moved: dict[str, set[str]] = defaultdict(set)
        for ref, doc in docs.items():
            if ref in poison:
                continue
            emails = touched(before.get(ref), doc)
            if emails:
                visible[ref] = doc is not None
                moved[ref.mailbox_id] |= emails
        if visible:
            self.keeper.index.wait_visible(visible, VISIBLE_WAIT_S)
            for mailbox, emails in sorted(moved.items()):
                self.keeper.refresh(mailbox, emails)
        return poison


@lru_cache(maxsize=4)
def keeper(settings: Settings) -> ContactsKeeper:
    """This process's keeper (its summary index created if missing)."""
    index = ContactsIndex(factories.fulltext_index(settings))
    index.ensure()
    return ContactsKeeper(index, ParticipantStore(aws.client(settings, "dynamodb"),
                                                  settings.resolved_state_table))


def fulltext_sink(settings: Settings) -> FullTextSink:
    """The sink every full-text write path uses. An OpenSearch Serverless collection keeps
    no summary (it has no ``_refresh`` to wait for nor ``_delete_by_query``)."""
    messages = factories.fulltext_index(settings)
    if messages.serverless:
        return messages
    return KeptSink(messages, keeper(settings))
