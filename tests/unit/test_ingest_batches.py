"""How the ingestor cuts batches (pure: the send is a list, no broker).

A message is synced once per batch that names it, so where a batch ends decides how often a
message's items are re-read and its PEOPLE item written (issue 28).
"""

from __future__ import annotations

from typing import Any

from indexer.core.items import message_pk
from indexer.core.records import RawRecord
from indexer.pipeline.ingest import Ingestor
from tests.unit.test_core import stream_record

TK = "b" * 64


def _records(n: int, shard: str = "s") -> list[RawRecord]:
    """Message n's Message, Body and participant records."""
    mk = f"{n:064x}"
    keys = [
        (f"M#box#T#{TK}", f"MSG#000001700000#{mk}"),
        (message_pk("box", mk), "BODY"),
        (f"M#box#A#a{n}@example.org", f"000001700000#{mk}#to"),
    ]
    return [RawRecord(f"{shard}:{n}:{i}", stream_record(pk, sk)) for i, (pk, sk) in enumerate(keys)]


class _Batches:
    def __init__(self) -> None:
        self.fulltext: list[list[str]] = []

    def send(self, stage: str, payload: dict[str, Any]) -> Any:
        if stage == "fulltext":
            self.fulltext.append([m[1] for m in payload["messages"]])
        return None


def _ingestor(limit: int) -> tuple[Ingestor, _Batches]:
    sent = _Batches()
    return Ingestor(sent.send, lambda item, reason: None, limit), sent


def _messages_synced_twice(batches: list[list[str]]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for batch in batches:
        twice |= seen & set(batch)
        seen |= set(batch)
    return twice


def test_a_batch_boundary_never_splits_a_message() -> None:
    run, sent = _ingestor(limit=2)
    run.feed_all([r for n in range(5) for r in _records(n)])
    assert [len(b) for b in sent.fulltext] == [2, 2, 1]
    assert not _messages_synced_twice(sent.fulltext)


def test_a_sweep_over_shards_is_grouped_by_message() -> None:
    """Each message's records spread over three shards' pages, fed shard after shard."""
    per_message = [_records(n) for n in range(6)]
    sweep = [recs[i] for i in range(3) for recs in per_message]  # shard i holds item i
    run, sent = _ingestor(limit=4)
    run.feed_together(sweep)
    assert sorted(m for b in sent.fulltext for m in b) == sorted(f"{n:064x}" for n in range(6))
    assert not _messages_synced_twice(sent.fulltext)
    # fed one record at a time in the same order, the batches split messages
    plain, split = _ingestor(limit=4)
    plain.feed_all(sweep)
    assert _messages_synced_twice(split.fulltext)


def test_records_naming_no_message_and_bad_records_still_count() -> None:
    thread = RawRecord("t", stream_record(f"M#box#T#{TK}", "THREAD"))
    bad = RawRecord("x", {"eventName": "INSERT", "dynamodb": {}})
    dead: list[str] = []
    run = Ingestor(_Batches().send, lambda item, reason: dead.append(item.source), 10)
    run.feed_together([thread, *_records(1), bad])
    assert run.summary.read == 5 and run.summary.ignored == 1
    assert dead == ["x"] and run.summary.dead_lettered == 1
