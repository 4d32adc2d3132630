"""The ingestor sends again a task its broker lost, and only such a task (pure: no broker)."""

from __future__ import annotations

from typing import Any

import pytest
from celery.exceptions import TimeoutError as CeleryTimeoutError

from indexer.core.records import RawRecord
from indexer.pipeline.ingest import POLL_S, Ingestor
from tests.unit.test_core import stream_record


class _Silent:
    """A task that never answers (lost, or still queued)."""

    def get(self, timeout: float | None = None, propagate: bool = True) -> Any:
        raise CeleryTimeoutError("no answer")


class _Done:
    def __init__(self, payload: dict[str, Any]) -> None:
        self.payload = payload

    def get(self, timeout: float | None = None, propagate: bool = True) -> Any:
        return {"stage": "fulltext", "applied": len(self.payload["messages"])}


def _record(n: int) -> RawRecord:
    """A Message item's INSERT (one message, both stages)."""
    mk, tk = f"{n:064x}", "b" * 64
    return RawRecord(f"test:{n}", stream_record(f"M#box#T#{tk}", f"MSG#000001700000#{mk}"))


def _ingestor(lost: bool) -> tuple[Ingestor, list[str], list[Any]]:
    sent: list[str] = []
    asked: list[Any] = []

    def send(stage: str, payload: dict[str, Any]) -> Any:
        sent.append(stage)
        # the first send of each task is lost; a second one is answered
        return _Silent() if sent.count(stage) == 1 else _Done(payload)

    def is_lost(pending: list[Any]) -> list[bool]:
        asked.extend(pending)
        return [lost and isinstance(p, _Silent) for p in pending]

    run = Ingestor(send, lambda item, reason: None, 10, lost=is_lost, lost_check_s=0.0)
    return run, sent, asked


def test_a_lost_task_is_sent_again_and_its_answer_counted() -> None:
    run, sent, asked = _ingestor(lost=True)
    run.feed_all([_record(1), _record(2)])
    first_sends = list(sent)
    summary = run.wait(timeout_s=30)
    assert summary.resent == len(first_sends) > 0
    assert sent == first_sends + first_sends  # each task once more, no more
    assert all(isinstance(p, _Silent) for p in asked)
    assert summary.applied == 2 and summary.dead_lettered == 0


def test_a_task_the_broker_still_holds_is_never_sent_again() -> None:
    run, sent, asked = _ingestor(lost=False)
    run.feed_all([_record(1)])
    with pytest.raises(CeleryTimeoutError):
        run.wait(timeout_s=POLL_S + 0.2)  # asks until the last slice, then gives up
    assert asked and run.summary.resent == 0 and len(sent) == len(set(sent))


def test_a_task_missing_at_one_look_only_is_not_sent_again() -> None:
    """A task in a worker's hands (popped, not yet recorded unacked) is missing for an instant."""
    looks: list[int] = []

    def once_missing(pending: list[Any]) -> list[bool]:
        looks.append(len(pending))
        return [len(looks) == 1] * len(pending)

    sent: list[str] = []

    def send(stage: str, payload: dict[str, Any]) -> Any:
        sent.append(stage)
        return _Silent()

    run = Ingestor(send, lambda item, reason: None, 10, lost=once_missing, lost_check_s=0.0)
    run.feed_all([_record(1)])
    with pytest.raises(CeleryTimeoutError):
        run.wait(timeout_s=POLL_S + 0.2)
    assert len(looks) > 2 and run.summary.resent == 0 and len(sent) == 2
