"""A replay's first read is eventually consistent; the strong verify read after each write
keeps the result exact (pure: the table and the index are dictionaries)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from indexer.core.documents import MessageState
from indexer.core.plan import MAIL_READ_CONSISTENT, MessageRef, ParticipantRef
from indexer.pipeline.sync import sync_fulltext

REF = MessageRef("box@example.org", "a" * 64)


def _state(subject: str) -> MessageState:
    message = {"mailbox_id": REF.mailbox_id, "message_key": REF.message_key,
               "thread_key": "t" * 64, "ts": 1700000000, "subject": subject,
               "from_email": "a@example.org"}
    return MessageState(REF, message, {"clean": "hello"})


class _Table:
    """The current item, and the version an eventually consistent read may still return."""

    def __init__(self, stale: str | None) -> None:
        self.current, self.stale = _state("new"), _state(stale) if stale else None
        self.reads: list[bool] = []

    def read_states(self, refs: Collection[MessageRef], *, participants: bool
                    ) -> dict[MessageRef, MessageState]:
        consistent = MAIL_READ_CONSISTENT.get()
        self.reads.append(consistent)
        state = self.stale if (self.stale is not None and not consistent) else self.current
        return {r: state for r in refs}

    def sync_participants(self, refs: Collection[ParticipantRef]) -> None:
        pass


class _Index:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def apply(self, docs: Mapping[MessageRef, Mapping[str, Any] | None]) -> dict[MessageRef, str]:
        self.writes += [str((doc or {}).get("subject")) for doc in docs.values()]
        return {}


def test_a_stale_first_read_costs_one_more_round_and_ends_exact() -> None:
    table, index = _Table(stale="old"), _Index()
    outcome = sync_fulltext(table, index, [REF], replay=True)
    assert table.reads == [False, True, True]  # eventual first, every verify strong
    assert index.writes == ["old", "new"] and outcome.applied == {REF}


def test_the_live_path_reads_strongly_and_a_fresh_replay_writes_once() -> None:
    live, index = _Table(stale="old"), _Index()
    sync_fulltext(live, index, [REF])
    assert live.reads == [True, True] and index.writes == ["new"]
    replay, index = _Table(stale=None), _Index()
    sync_fulltext(replay, index, [REF], replay=True)
    assert replay.reads == [False, True] and index.writes == ["new"]
