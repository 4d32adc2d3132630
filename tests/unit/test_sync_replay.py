"""An eventually consistent first read (a replay's, and the live path's by default): the
strong verify read after each write keeps the result exact (pure: the table and the index are dictionaries)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from indexer.core.documents import MessageState
from indexer.core.plan import MAIL_READ_CONSISTENT, MessageRef, ParticipantRef
from indexer.core.task_payload import TaskPayload
from indexer.pipeline.sync import sync_fulltext
from indexer.settings import Settings

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

    def stage_participants(self, refs: Collection[ParticipantRef]) -> Any:
        raise AssertionError("no participant items in these batches")


class _Index:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def apply(self, docs: Mapping[MessageRef, Mapping[str, Any] | None]) -> dict[MessageRef, str]:
        self.writes += [str((doc or {}).get("subject")) for doc in docs.values()]
        return {}


def test_a_stale_first_read_costs_one_more_round_and_ends_exact() -> None:
    table, index = _Table(stale="old"), _Index()
    outcome = sync_fulltext(table, index, [REF], eventual=True)
    assert table.reads == [False, True, True]  # eventual first, every verify strong
    assert index.writes == ["old", "new"] and outcome.applied == {REF}
    assert outcome.rewritten == 1  # what sidecar_sync_rewritten_total counts


def test_the_live_path_reads_strongly_and_a_fresh_replay_writes_once() -> None:
    live, index = _Table(stale="old"), _Index()
    sync_fulltext(live, index, [REF])
    assert live.reads == [True, True] and index.writes == ["new"]
    replay, index = _Table(stale=None), _Index()
    outcome = sync_fulltext(replay, index, [REF], eventual=True)
    assert replay.reads == [False, True] and index.writes == ["new"]
    assert outcome.rewritten == 0


def test_a_task_reads_first_as_the_deployment_says_and_a_replay_always_eventually() -> None:
    live, replay = TaskPayload.of([REF]), TaskPayload.of([REF], replay=True)
    assert live.first_read_eventual("eventual") and not live.first_read_eventual("strong")
    assert replay.first_read_eventual("strong") and replay.first_read_eventual("eventual")
    assert Settings().first_read == "eventual"
