"""The participant store's sync inside a full-text sync (issue 42): its reads beside the first
read of the messages, its writes beside the first bulk, and the verify read after both (pure:
the table, the store and the index are dictionaries; barriers prove what runs beside what)."""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from indexer.core.documents import MessageState, Participant
from indexer.core.plan import MessageRef, ParticipantRef
from indexer.pipeline.sync import sync_fulltext

REF = MessageRef("box@example.org", "a" * 64)
TO = ParticipantRef(REF, "M#box@example.org#A#bob@example.org", "TO")
BOB = Participant("to", "bob@example.org", "Bob")
CAROL = Participant("cc", "carol@example.org", None)
TIMEOUT = 5.0


@dataclass
class _Staged:
    table: _Table
    projected: Mapping[MessageRef, tuple[Participant, ...]]

    def commit(self) -> None:
        self.table.events.append("commit start")
        self.table.beside_bulk.wait(TIMEOUT)  # fails (BrokenBarrierError) unless beside the bulk
        self.table.store.update({r: list(p) for r, p in self.projected.items()})
        self.table.store[REF].extend(self.table.meanwhile)  # another worker's participant
        self.table.events.append("commit end")


@dataclass
class _Table:
    message: dict[str, Any] | None
    store: dict[MessageRef, list[Participant]] = field(default_factory=dict)
    meanwhile: list[Participant] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    beside_read: threading.Barrier = field(default_factory=lambda: threading.Barrier(2))
    beside_bulk: threading.Barrier = field(default_factory=lambda: threading.Barrier(2))

    def read_states(self, refs: Collection[MessageRef], *, participants: bool
                    ) -> dict[MessageRef, MessageState]:
        first = not any(e.startswith("read") for e in self.events)
        self.events.append("read")
        if first:
            self.beside_read.wait(TIMEOUT)
        return {r: MessageState(r, self.message, {"clean": "hi"},
                                tuple(self.store.get(r, ())) if self.message else ())
                for r in refs}

    def stage_participants(self, refs: Collection[ParticipantRef]) -> _Staged:
        self.events.append("stage")
        self.beside_read.wait(TIMEOUT)
        return _Staged(self, {REF: (BOB,)})


@dataclass
class _Index:
    table: _Table
    docs: dict[MessageRef, Mapping[str, Any] | None] = field(default_factory=dict)
    writes: int = 0

    def apply(self, docs: Mapping[MessageRef, Mapping[str, Any] | None]) -> dict[MessageRef, str]:
        self.table.events.append("bulk")
        if self.writes == 0:
            self.table.beside_bulk.wait(TIMEOUT)
        self.writes += 1
        self.docs.update(docs)
        return {}


def _message() -> dict[str, Any]:
    return {"mailbox_id": REF.mailbox_id, "message_key": REF.message_key,
            "thread_key": "t" * 64, "ts": 1700000000, "subject": "hello"}


def test_the_first_document_names_the_participants_the_store_is_being_given() -> None:
    table = _Table(_message())
    index = _Index(table)
    outcome = sync_fulltext(table, index, [REF], [TO])
    assert outcome.applied == {REF} and outcome.rewritten == 0
    doc = index.docs[REF]
    assert doc is not None and doc["to"] == ["bob@example.org"] and doc["to_names"] == ["Bob"]
    assert table.store[REF] == [BOB]
    # the verify read came after the commit had returned: it read what the store holds
    assert table.events.index("commit end") < len(table.events) - 1 - table.events[::-1].index("read")


def test_a_participant_another_worker_added_meanwhile_is_caught_by_the_verify_read() -> None:
    table = _Table(_message(), meanwhile=[CAROL])
    index = _Index(table)
    outcome = sync_fulltext(table, index, [REF], [TO])
    assert outcome.rewritten == 1 and index.writes == 2
    doc = index.docs[REF]
    assert doc is not None and doc["to"] == ["bob@example.org"]
    assert doc["cc"] == ["carol@example.org"]


def test_a_message_gone_keeps_no_document_whatever_the_store_is_given() -> None:
    table = _Table(None)
    index = _Index(table)
    outcome = sync_fulltext(table, index, [REF], [TO])
    assert outcome.applied == {REF} and index.docs == {REF: None}


def test_without_participant_items_nothing_is_staged() -> None:
    table = _Table(_message(), store={REF: [CAROL]})
    table.beside_read = threading.Barrier(1)  # the first read waits for no one
    index = _Index(table)
    index.writes = 1  # nor does the bulk

    def refuse(refs: Collection[ParticipantRef]) -> _Staged:
        raise AssertionError("staged without participant items")

    table.stage_participants = refuse  # type: ignore[method-assign]
    sync_fulltext(table, index, [REF])
    doc = index.docs[REF]
    assert doc is not None and doc["cc"] == ["carol@example.org"]


def test_a_failed_commit_fails_the_sync_after_the_bulk_returned() -> None:
    table = _Table(_message())
    index = _Index(table)

    def broken(self: _Staged) -> None:
        table.beside_bulk.wait(TIMEOUT)
        raise RuntimeError("ValidationException: item size has exceeded the maximum")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Staged, "commit", broken)
        with pytest.raises(RuntimeError, match="ValidationException"):
            sync_fulltext(table, index, [REF], [TO])
    assert index.writes == 1  # the task fails and is retried or dead-lettered with the reason
