"""Keep the contact summary in step with the full-text index, in the batch that moved it.

Every path that writes the full-text index through :func:`indexer.pipeline.sync.sync_fulltext`
(the Celery task, the Lambda handler, ``sidecar import``) gets :func:`fulltext_sink`: the
message index with the summary kept beside it.

Why the recount waits for the batch's writes to be searchable: the figures are counted by searches,
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

import threading
import zlib
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Recount:
    """One mailbox's contacts a batch moved: its addresses, to recount once each message the
    batch wrote (True) or deleted (False) is searchable as such."""

    mailbox: str
    emails: frozenset[str]
    visible: Mapping[MessageRef, bool]

    def to_json(self) -> dict[str, Any]:
        return {"mailbox": self.mailbox, "emails": sorted(self.emails),
                "visible": [[*r.to_json(), p] for r, p in sorted(self.visible.items())]}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Recount:
        """Decode :meth:`to_json` (a wrong shape raises ``ValueError``)."""
        mailbox, emails, visible = raw.get("mailbox"), raw.get("emails"), raw.get("visible")
        if not (isinstance(mailbox, str) and isinstance(emails, list)
                and all(isinstance(e, str) for e in emails) and isinstance(visible, list)
                and all(isinstance(v, list) and len(v) == 3 and isinstance(v[2], bool)
                        for v in visible)):
            raise ValueError("a recount is {mailbox, emails: [str], visible: [[m, key, bool]]}")
        return cls(mailbox, frozenset(emails),
                   {MessageRef.from_json(v[:2]): v[2] for v in visible})


Defer = Callable[[Recount], None]


_MAILBOX_LOCKS = tuple(threading.Lock() for _ in range(64))


def _mailbox_locks(mailboxes: Iterable[str]) -> list[threading.Lock]:
    """The locks of these mailboxes, in one fixed order (no two callers can deadlock): one
    of a fixed set per mailbox, always the same, so the set stays bounded whatever the number
    of mailboxes (two mailboxes sharing one only wait for each other)."""
    slots = {zlib.crc32(m.encode()) % len(_MAILBOX_LOCKS) for m in mailboxes}
    return [_MAILBOX_LOCKS[i] for i in sorted(slots)]


def recount(keeper: ContactsKeeper, recounts: Iterable[Recount]) -> int:
    """Wait until each recount's messages are searchable as written, then make its contacts
    match the index; the contact documents written.

    One mailbox's recounts run one at a time in a process: the contacts worker runs many at
    once on threads (:mod:`indexer.pipeline.workers`), and recounts of one mailbox move the
    same contacts (its own address, a list's), so side by side they would each poll for
    their writes, count, write and count again while the other's writes moved the figures.
    In turn, the one that waited finds its writes already searchable at its first look."""
    todo = list(recounts)
    with ExitStack() as held:
        for lock in _mailbox_locks(rc.mailbox for rc in todo):
            held.enter_context(lock)
        visible = {r: p for rc in todo for r, p in rc.visible.items()}
        if visible:
            keeper.index.wait_visible(visible, VISIBLE_WAIT_S)
        return sum(keeper.refresh(rc.mailbox, rc.emails) for rc in todo if rc.emails)


def merged(recounts: Iterable[Recount]) -> list[Recount]:
    """Recounts of the same mailbox as one (``sidecar import`` recounts once at its end)."""
    emails: dict[str, set[str]] = defaultdict(set)
    visible: dict[str, dict[MessageRef, bool]] = defaultdict(dict)
    for rc in recounts:
        emails[rc.mailbox] |= rc.emails
        visible[rc.mailbox].update(rc.visible)
    return [Recount(m, frozenset(e), visible[m]) for m, e in sorted(emails.items())]


class KeptSink:
    """The full-text sink (:class:`indexer.pipeline.sync.FullTextSink`) with the contact
    summary kept beside it: recounted here, after waiting for the batch to be searchable,
    or handed to ``defer`` to be recounted later."""

    def __init__(self, messages: OpenSearchIndex, keeper: ContactsKeeper,
                 defer: Defer | None = None) -> None:
        self.messages = messages
        self.keeper = keeper
        self.defer = defer

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
        recounts = [Recount(m, frozenset(e), {r: p for r, p in visible.items()
                                              if r.mailbox_id == m})
                    for m, e in sorted(moved.items())]
        if self.defer is None:
            recount(self.keeper, recounts)
        else:
            for rc in recounts:
                self.defer(rc)
        return poison


@lru_cache(maxsize=4)
def keeper(settings: Settings) -> ContactsKeeper:
    """This process's keeper (its summary index created if missing)."""
    index = ContactsIndex(factories.fulltext_index(settings))
    index.ensure()
    return ContactsKeeper(index, ParticipantStore(aws.client(settings, "dynamodb"),
                                                  settings.resolved_state_table))


def fulltext_sink(settings: Settings, defer: Defer | None = None) -> FullTextSink:
    """The sink every full-text write path uses (its recounts handed to ``defer`` if given).
    An OpenSearch Serverless collection keeps no summary (it has no ``_refresh`` to wait
    for nor ``_delete_by_query``)."""
    messages = factories.fulltext_index(settings)
    if messages.serverless:
        return messages
    return KeptSink(messages, keeper(settings), defer)
