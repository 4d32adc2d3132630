"""The backfills' participants-first pass: buffered, sorted by message, chunks cut at message
boundaries, marks put only after their refs were synced (pure: the store is a list)."""

from __future__ import annotations

from functools import partial

import pytest

from indexer.core.errors import TransientError
from indexer.core.plan import MessageRef, ParticipantRef
from indexer.core.records import RawRecord
from indexer.sources.people_pass import PeoplePass, message_chunks
from tests.unit.test_core import stream_record


def _ref(n: int, who: str) -> ParticipantRef:
    mk = f"{n:064x}"
    return ParticipantRef(MessageRef("box", mk), f"M#box#A#{who}@x.org", f"000001700000#{mk}#to")


def _row(ref: ParticipantRef) -> RawRecord:
    return RawRecord("t", stream_record(ref.pk, ref.sk))


class _Store:
    def __init__(self, fail: int = 0) -> None:
        self.chunks: list[list[ParticipantRef]] = []
        self.fail = fail

    def sync_participants(self, refs: list[ParticipantRef]) -> None:
        if self.fail:
            self.fail -= 1
            raise ValueError("refused")
        self.chunks.append(list(refs))


def test_chunks_never_split_a_message() -> None:
    refs = {_ref(n, w) for n in range(5) for w in "abc"}
    chunks = list(message_chunks(refs, 2))
    assert [len(c) for c in chunks] == [6, 6, 3]
    assert sorted(r for c in chunks for r in c) == sorted(refs)
    assert all(len({r.message for r in c}) <= 2 for c in chunks)


def test_a_message_spread_over_units_is_written_once_per_buffer() -> None:
    """Message 1's participants lie in three files: one sync names all of them."""
    store, marked = _Store(), list[int]()
    run = PeoplePass(store, batch_messages=64)
    for unit, who in enumerate("abc"):
        run.add([_row(_ref(1, who)), _row(_ref(2, who))], partial(marked.append, unit))
    assert store.chunks == [] and marked == []  # nothing synced before the flush
    run.flush()
    assert len(store.chunks) == 1 and len(store.chunks[0]) == 6
    assert marked == [0, 1, 2] and run.synced == 6 and not run.unsynced


def test_a_full_buffer_is_synced_and_marked_at_once() -> None:
    store, marked = _Store(), []
    run = PeoplePass(store, batch_messages=64, limit=3)
    run.add([_row(_ref(1, w)) for w in "ab"], lambda: marked.append("first"))
    assert marked == []
    run.add([_row(_ref(2, "a"))], lambda: marked.append("second"))
    assert marked == ["first", "second"] and len(store.chunks) == 1


def test_a_failed_chunk_leaves_its_refs_to_the_message_pass_and_no_mark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("indexer.sources.people_pass.time.sleep", lambda s: None)
    store, marked = _Store(fail=1), []
    run = PeoplePass(store, batch_messages=1)
    run.add([_row(_ref(1, "a")), _row(_ref(2, "a"))], lambda: marked.append(1))
    run.flush()
    assert run.unsynced == {_ref(1, "a")} and marked == [] and run.synced == 1


def test_transient_errors_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("indexer.sources.people_pass.time.sleep", lambda s: None)

    class Flaky(_Store):
        def sync_participants(self, refs: list[ParticipantRef]) -> None:
            if not self.chunks and self.fail:
                self.fail -= 1
                raise TransientError("throttled")
            super().sync_participants(refs)

    store, marked = Flaky(fail=1), []
    run = PeoplePass(store, batch_messages=8)
    run.add([_row(_ref(1, "a"))], lambda: marked.append(1))
    run.flush()
    assert marked == [1] and not run.unsynced
