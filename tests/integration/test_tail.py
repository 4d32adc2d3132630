"""``sidecar tail``: a fake stream API for what moto cannot emulate (splits, iterator expiry,
throttling, trimmed records), then the real stack: workers, checkpoints, lease takeover."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from indexer.adapters.dynamodb.state import Lease, ShardCheckpoint
from indexer.core.export_window import iso
from indexer.metrics import GAPS
from indexer.sources.tail.loop import StreamTailer
from indexer.sources.tail.state import TailOptions

ARN = "arn:aws:dynamodb:us-east-1:0:table/t/stream/x"


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "Op")


class FakeStreams:
    """Shards with records, closing, trimming and expiry; describe pages one shard at a time."""

    def __init__(self) -> None:
        self.shards: dict[str, dict[str, Any]] = {}
        self.records: dict[str, list[dict[str, Any]]] = {}
        self.trimmed: dict[str, int] = {}  # shard -> records before this index are gone
        self.failures: list[tuple[str, Exception]] = []  # (method, error) raised once, in order
        self.expired: set[str] = set()
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.seq = 0

    def add_shard(self, sid: str, parent: str | None = None) -> None:
        self.shards[sid] = {"ShardId": sid, "SequenceNumberRange": {}}
        if parent:
            self.shards[sid]["ParentShardId"] = parent
        self.records[sid] = []

    def put(self, sid: str, n: int = 1) -> None:
        for _ in range(n):
            self.seq += 1
            self.records[sid].append(
                {"eventName": "INSERT", "dynamodb": {"SequenceNumber": f"{self.seq:021d}"}}
            )

    def close(self, sid: str) -> None:
        self.shards[sid]["SequenceNumberRange"]["EndingSequenceNumber"] = f"{self.seq:021d}"

    def _fail(self, method: str, args: dict[str, Any]) -> None:
        self.calls.append((method, args))
        if self.failures and self.failures[0][0] == method:
            raise self.failures.pop(0)[1]

    def describe_stream(self, **args: Any) -> dict[str, Any]:
        self._fail("describe_stream", args)
        ids = list(self.shards)
        start = (
            ids.index(args["ExclusiveStartShardId"]) + 1 if "ExclusiveStartShardId" in args else 0
        )
        page = [self.shards[s] for s in ids[start : start + 1]]
        desc: dict[str, Any] = {"Shards": page}
        if start + 1 < len(ids):
            desc["LastEvaluatedShardId"] = ids[start]
        return {"StreamDescription": desc}

    def get_shard_iterator(self, **args: Any) -> dict[str, Any]:
        self._fail("get_shard_iterator", args)
        sid, kind = args["ShardId"], args["ShardIteratorType"]
        if sid not in self.shards:
            raise client_error("ResourceNotFoundException")
        seqs = [r["dynamodb"]["SequenceNumber"] for r in self.records[sid]]
        low = self.trimmed.get(sid, 0)
        if kind == "AFTER_SEQUENCE_NUMBER":
            pos = seqs.index(args["SequenceNumber"]) + 1
            if pos - 1 < low:
                raise client_error("TrimmedDataAccessException")
        else:
            pos = low if kind == "TRIM_HORIZON" else len(seqs)
        return {"ShardIterator": f"{sid}|{pos}|{len(self.calls)}"}

    def get_records(self, **args: Any) -> dict[str, Any]:
        self._fail("get_records", args)
        if args["ShardIterator"] in self.expired:
            raise client_error("ExpiredIteratorException")
        sid, pos, _ = args["ShardIterator"].split("|")
        records = self.records[sid][int(pos) : int(pos) + min(args["Limit"], 2)]
        end = int(pos) + len(records)
        out: dict[str, Any] = {"Records": records}
        closed = "EndingSequenceNumber" in self.shards[sid]["SequenceNumberRange"]
        if not (closed and end >= len(self.records[sid])):
            out["NextShardIterator"] = f"{sid}|{end}|{len(self.calls)}"
        return out


class FakeCheckpoints:
    def __init__(self, saved: dict[str, ShardCheckpoint] | None = None) -> None:
        self.saved = dict(saved or {})

    def load(self) -> dict[str, ShardCheckpoint]:
        return dict(self.saved)

    def save(self, checkpoint: ShardCheckpoint) -> None:
        self.saved[checkpoint.shard_id] = checkpoint


class FakeSink:
    """Records the sequence numbers it applied; ``fail`` makes the next wait() raise;
    ``running`` keeps its vectors tasks unanswered (``done()`` is False)."""

    applied: list[str]
    sent: list[str]
    fail = 0
    running = False

    def __init__(self, log: list[str], owner: type[FakeSink]) -> None:
        self._fed: list[str] = []
        self._log = log
        self._owner = owner

    def feed_together(self, items: list[Any]) -> None:
        self._fed.extend(item.raw["dynamodb"]["SequenceNumber"] for item in items)
        self._owner.sent.extend(self._fed)

    def wait(self, timeout_s: float = 0) -> None:
        if self._owner.fail:
            self._owner.fail -= 1
            raise TimeoutError("workers slow")
        self._log.extend(self._fed)

    def done(self) -> bool:
        return not self._owner.running

    def batches(self) -> int:
        return 1


def tailer(
    fake: FakeStreams, store: FakeCheckpoints | None = None, **opts: Any
) -> tuple[StreamTailer, list[str], type[FakeSink]]:
    applied: list[str] = []
    sink_type = type("Sink", (FakeSink,), {"fail": 0, "sent": [], "running": False})
    options = TailOptions(**{"discover_every_s": 0, "idle_s": 0, "backoff_base_s": 0,
                             "sweep_gap_s": 0, **opts})
    t = StreamTailer(
        fake,
        ARN,
        store or FakeCheckpoints(),
        lambda: sink_type(applied, sink_type),
        options=options,
    )
    return t, applied, sink_type


def drain(t: StreamTailer, steps: int = 30) -> None:
    for _ in range(steps):
        t.poll_once()


def seqs(fake: FakeStreams, *shards: str) -> list[str]:
    return [r["dynamodb"]["SequenceNumber"] for s in shards for r in fake.records[s]]


def test_parent_read_to_its_end_before_children_after_split() -> None:
    fake = FakeStreams()
    fake.add_shard("A")
    fake.put("A", 3)
    store = FakeCheckpoints()
    t, applied, _ = tailer(fake, store)
    t.poll_once()
    assert applied == seqs(fake, "A")[:2]  # one page (2 records) at a time
    # split: A gets its last records and closes; children already hold newer ones
    fake.put("A", 2)
    fake.close("A")
    fake.add_shard("B", parent="A")
    fake.add_shard("C", parent="A")
    fake.put("B", 3)
    fake.put("C", 1)
    drain(t)
    parent = seqs(fake, "A")
    assert applied[: len(parent)] == parent
    assert sorted(applied[len(parent) :]) == seqs(fake, "B", "C")
    assert store.saved["A"] == ShardCheckpoint("A", parent[-1], done=True)
    assert store.saved["B"].sequence == seqs(fake, "B")[-1] and not store.saved["B"].done
    assert not t.gaps
    # a finished parent is never read again
    reads = [c for c in fake.calls if c[0] == "get_shard_iterator" and c[1]["ShardId"] == "A"]
    drain(t, 5)
    assert reads == [
        c for c in fake.calls if c[0] == "get_shard_iterator" and c[1]["ShardId"] == "A"
    ]


def test_one_sweep_applies_the_pages_of_every_shard_as_one_set() -> None:
    """A message's records reach several shards: a sweep's pages go to one sink (one set of
    batches), and each shard's checkpoint moves only after that sink applied them; a sweep
    that fails is read again from the checkpoints."""
    fake = FakeStreams()
    for sid in ("A", "B", "C"):
        fake.add_shard(sid)
        fake.put(sid, 2)
    store = FakeCheckpoints()
    t, applied, sink = tailer(fake, store)
    made: list[int] = []
    factory = t._sink_factory

    def counted() -> Any:
        made.append(1)
        return factory()

    t._sink_factory = counted
    sink.fail = 1
    assert t.poll_once() == 6  # sent as one set; waiting for it fails: back to the checkpoints
    assert applied == [] and store.saved == {}
    drain(t, 3)
    assert sorted(applied) == seqs(fake, "A", "B", "C") and len(made) == 2
    assert {sid: c.sequence for sid, c in store.saved.items()} == {
        sid: seqs(fake, sid)[-1] for sid in ("A", "B", "C")}


def _two_sweeps_in_flight(in_flight: int) -> tuple[
        FakeStreams, FakeCheckpoints, tuple[StreamTailer, list[str], type[FakeSink]]]:
    """One shard, two sweeps of two records sent, their tasks still running."""
    fake = FakeStreams()
    fake.add_shard("A")
    fake.put("A", 2)
    store = FakeCheckpoints()
    made = tailer(fake, store, in_flight=in_flight)
    made[2].running = True
    made[0].poll_once()
    fake.put("A", 2)
    made[0].poll_once()
    return fake, store, made


def test_the_next_sweep_is_read_while_vectors_run_and_positions_wait_for_them() -> None:
    """Full text never waits behind embedding: a sweep whose tasks still run stays in flight
    while the next sweeps are read and sent; its checkpoint moves once it has answered, oldest
    first, and past ``in_flight`` records the oldest is waited for."""
    fake, store, (t, applied, sink) = _two_sweeps_in_flight(in_flight=4)
    assert sink.sent == seqs(fake, "A") and applied == [] and store.saved == {}
    fake.put("A", 2)
    t.poll_once()  # three in flight: the oldest is waited for and committed
    assert applied == seqs(fake, "A")[:2] and store.saved["A"].sequence == seqs(fake, "A")[1]
    sink.running = False
    t.poll_once()
    assert applied == seqs(fake, "A") and store.saved["A"].sequence == seqs(fake, "A")[-1]
    assert t.applied == 6


def test_the_next_sweep_waits_its_gap_and_gathers_what_arrived() -> None:
    """For ``sweep_gap_s`` after a sweep was sent the tailer reads nothing: what arrives
    meanwhile goes out as one batch, not as a queue of one-message tasks each waiting for the
    one before. Tasks still running hold nothing after the gap."""
    fake = FakeStreams()
    fake.add_shard("A")
    fake.put("A", 1)
    now = [0.0]
    t, _, sink = tailer(fake, sweep_gap_s=0.25, clock=lambda: now[0])
    sink.running = True
    assert t.poll_once() == 1
    fake.put("A", 2)
    assert t.coalescing() and t.poll_once() == 0  # within the gap: held
    now[0] = 0.3
    assert not t.coalescing() and t.poll_once() == 2  # the gap passed: both, one sweep
    assert sink.sent == seqs(fake, "A")


def test_an_idle_tailer_sleeps_until_a_shard_is_due_not_a_tick_longer() -> None:
    """After an empty page the shard is read again ``idle_s`` later, and the loop sleeps
    exactly until then: a record written just after an empty read waits ``idle_s`` (0.25 s
    for ``sidecar tail``), not ``idle_s`` plus half of it (the loop's old tick)."""
    fake = FakeStreams()
    fake.add_shard("A")
    now = [0.0]
    t, _, _ = tailer(fake, idle_s=0.25, clock=lambda: now[0])
    assert t.poll_once() == 0  # an empty page: A is due at 0.25
    now[0] = 0.1
    assert t.pause() == pytest.approx(0.15)
    fake.put("A", 1)
    assert t.poll_once() == 0  # not due yet: nothing read
    now[0] = 0.25
    assert t.pause() == pytest.approx(0.01)  # due: the floor, never a busy loop
    assert t.poll_once() == 1


def test_a_sweep_failing_in_flight_sends_the_tailer_back_to_its_checkpoints() -> None:
    fake, store, (t, applied, sink) = _two_sweeps_in_flight(in_flight=8)
    sink.running, sink.fail = False, 1  # the oldest sweep's vectors task fails
    drain(t, 6)
    assert applied == seqs(fake, "A")  # re-read from the start: nothing lost
    assert store.saved["A"].sequence == seqs(fake, "A")[-1]


def test_expired_iterator_is_reacquired_from_checkpoint() -> None:
    fake = FakeStreams()
    fake.add_shard("A")
    fake.put("A", 2)
    t, applied, _ = tailer(fake)
    drain(t, 3)
    fake.expired = {args["ShardIterator"] for m, args in fake.calls if m == "get_records"}
    fake.expired |= {f"A|2|{i}" for i in range(len(fake.calls) + 5)}
    fake.put("A", 3)
    drain(t, 10)
    assert applied == seqs(fake, "A")  # nothing lost, nothing twice
    after = [a for m, a in fake.calls if m == "get_shard_iterator"][-1]
    assert after["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER"
    assert after["SequenceNumber"] == seqs(fake, "A")[1]


def test_throttling_and_network_errors_are_retried_with_backoff() -> None:
    fake = FakeStreams()
    fake.add_shard("A")
    fake.put("A", 4)
    now = [0.0]
    t, applied, sink = tailer(fake, clock=lambda: now[0])
    t._opt.backoff_base_s = 1.0
    fake.failures = [
        ("describe_stream", client_error("LimitExceededException")),
        ("describe_stream", client_error("ThrottlingException")),
    ]
    t.poll_once()
    assert applied == [] and not fake.failures[1:]
    now[0] += 5
    fake.failures = [
        ("get_records", client_error("ProvisionedThroughputExceededException")),
        ("get_records", EndpointConnectionError(endpoint_url="http://x")),
    ]
    t.poll_once()
    t.poll_once()  # still backing off: no call
    assert applied == [] and len(fake.failures) == 1
    for _ in range(10):
        now[0] += 5
        t.poll_once()
    assert applied == seqs(fake, "A")
    # the pipeline failing to apply a page keeps the checkpoint and retries the same page
    fake.put("A", 1)
    sink.fail = 1
    now[0] += 5
    t.poll_once()
    assert applied == seqs(fake, "A")[:4]
    now[0] += 5
    t.poll_once()
    assert applied == seqs(fake, "A")


WRITTEN = 1796083200
LAST = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_expired_records_are_reported_as_gaps(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeStreams()
    fake.add_shard("B")
    fake.put("B", 4)
    fake.trimmed["B"] = 2  # the checkpointed record 1 and record 2 are gone
    fake.records["B"][-1]["dynamodb"]["ApproximateCreationDateTime"] = LAST  # as boto3 gives it
    store = FakeCheckpoints(
        {
            "gone": ShardCheckpoint("gone", "000000000000000000007", created=WRITTEN),
            "old": ShardCheckpoint("old", "000000000000000000003", done=True),
            "B": ShardCheckpoint("B", seqs(fake, "B")[0]),
        }
    )
    before = GAPS._value.get()
    t, applied, _ = tailer(fake, store)
    with caplog.at_level(logging.ERROR):
        drain(t, 6)
    assert {(g.shard_id, g.sequence) for g in t.gaps} == {
        ("gone", "000000000000000000007"),
        ("B", seqs(fake, "B")[0]),
    }
    assert GAPS._value.get() - before == 2
    assert "gone" in caplog.text and "000000000000000000007" in caplog.text
    assert "sidecar backfill" in caplog.text
    assert applied == seqs(fake, "B")[2:]  # carries on from the oldest record left
    # The repair is one command: an incremental export of the gap's window when the last
    # applied record's time is known, else a full export.
    gone = next(g for g in t.gaps if g.shard_id == "gone")
    assert gone.since == WRITTEN and gone.seen >= WRITTEN
    assert gone.repair == f"sidecar backfill --export --from {iso(WRITTEN - 60)} --to {iso(gone.seen)}"
    assert f"run `{gone.repair}`" in caplog.text
    assert "run `sidecar backfill --export`" in caplog.text  # B: no time was recorded
    # Checkpoints now record the last applied record's time, for the next gap.
    assert store.saved["B"].created == int(LAST.timestamp())


def test_start_at_latest_skips_history_only_on_first_listing() -> None:
    fake = FakeStreams()
    fake.add_shard("A")
    fake.put("A", 3)
    t, applied, _ = tailer(fake, start_at="latest")
    drain(t, 2)
    fake.put("A", 1)
    fake.close("A")
    fake.add_shard("B", parent="A")
    fake.put("B", 2)
    drain(t, 6)
    assert applied == seqs(fake, "A")[3:] + seqs(fake, "B")


# -- DynamoDB-backed state (moto) ------------------------------------------------------------


@pytest.mark.stack
def test_lease_is_exclusive_and_expires(settings: Any) -> None:
    from tests.support.pipeline_helpers import prepare_tables

    ddb = prepare_tables(settings)
    now = [1000.0]
    state = settings.resolved_state_table
    a = Lease(ddb, state, settings.table, "a", duration_s=10, clock=lambda: now[0])
    b = Lease(ddb, state, settings.table, "b", duration_s=10, clock=lambda: now[0])
    assert a.acquire_or_renew() and not b.acquire_or_renew()
    now[0] += 5
    assert a.acquire_or_renew() and not b.acquire_or_renew()  # renewed
    now[0] += 11  # a died: no renewal past expiry
    assert not a.held
    assert b.acquire_or_renew() and b.current_owner() == "b"
    assert not a.acquire_or_renew()
    b.release()
    assert a.acquire_or_renew() and a.generation == 2


# -- the real stack ----------------------------------------------------------------------------


def _converged(settings: Any, ddb: Any, mailboxes: list[str]) -> bool:
    from tests.support.pipeline_helpers import opensearch_docs, table_messages

    try:
        for mb in mailboxes:
            want = {k: m["subject"] for k, m in table_messages(ddb, settings.table, mb).items()}
            have = {k: d["subject"] for k, d in opensearch_docs(settings, mb).items()}
            if want != have:
                return False
    except Exception:
        return False
    return True


class Running:
    """A tailer in a thread; ``stop(release=False)`` simulates the process dying."""

    def __init__(self, settings: Any) -> None:
        from indexer.cli.tail_cmds import build_tailer

        self.tailer = build_tailer(settings, lease_s=4.0, renew_s=1.0)
        self.event = threading.Event()
        self.release = True
        self.thread = threading.Thread(
            target=lambda: self.tailer.run(self.event, release=self.release)
        )
        self.thread.start()

    def stop(self, release: bool = True) -> None:
        self.release = release
        self.event.set()
        self.thread.join(timeout=120)
        assert not self.thread.is_alive()


def _write(ddb: Any, table: str, op: str, i: int, mailbox: str, variant: int = 0) -> None:
    from sidecar_tools.writer.mapping import to_items
    from sidecar_tools.writer.store import delete_message, rewrite_message, store_message
    from tests.integration.test_convergence import email

    if op == "delete":
        delete_message(ddb, table, mailbox, f"<m{i}@example.org>")
    else:
        items = to_items(email(i, variant), mailbox)
        (store_message if op == "store" else rewrite_message)(ddb, table, items)


@pytest.mark.stack
@pytest.mark.slow
def test_tail_applies_writes_and_resumes_from_checkpoints(settings: Any) -> None:
    from indexer.adapters.aws import clients as aws
    from indexer.adapters.aws.streams import iter_stream_records, latest_stream_arn
    from indexer.adapters.dynamodb.state import ShardCheckpointStore
    from tests.support.pipeline_helpers import (
        prepare_tables,
        qdrant_points,
        table_messages,
        wait_until,
        workers,
    )

    ddb = prepare_tables(settings)
    mbs = ["alpha", "beta"]
    with workers(settings):
        first = Running(settings)
        for i in range(3):
            for mb in mbs:
                _write(ddb, settings.table, "store", i, mb)
        assert wait_until(lambda: _converged(settings, ddb, mbs), timeout=60)
        first.stop()
        _write(ddb, settings.table, "rewrite", 0, "alpha", variant=1)
        _write(ddb, settings.table, "delete", 1, "beta")
        _write(ddb, settings.table, "store", 3, "beta", variant=2)
        second = Running(settings)
        assert wait_until(lambda: _converged(settings, ddb, mbs), timeout=60)
        second.stop()
    arn = latest_stream_arn(ddb, settings.table)
    saved = ShardCheckpointStore(ddb, settings.resolved_state_table, arn).load()
    assert saved and all(c.sequence for c in saved.values())  # in DynamoDB, not Redis
    # the second reader resumed after the first one's checkpoint: no record read twice
    total = len(list(iter_stream_records(aws.client(settings, "dynamodbstreams"), arn)))
    assert first.tailer.applied + second.tailer.applied == total
    assert second.tailer.applied < total
    assert not first.tailer.gaps and not second.tailer.gaps
    points = qdrant_points(settings)
    want = {
        (mb, k)
        for mb in mbs
        for k, m in table_messages(ddb, settings.table, mb).items()
        if (m.get("forai") or "").strip()
    }
    assert set(points) == want


@pytest.mark.stack
@pytest.mark.slow
def test_standby_takes_over_when_the_holder_dies(settings: Any) -> None:
    from tests.support.pipeline_helpers import prepare_tables, wait_until, workers

    ddb = prepare_tables(settings)
    mbs = ["alpha", "beta"]
    with workers(settings):
        one, two = Running(settings), Running(settings)
        leases = [one.tailer._lease, two.tailer._lease]
        assert wait_until(lambda: any(lease.held for lease in leases if lease), timeout=10)
        time.sleep(2.5)  # a few renewals: the standby stays standby (what is tested, not a wait)
        held = [r for r in (one, two) if r.tailer._lease and r.tailer._lease.held]
        assert len(held) == 1
        active, standby = held[0], (two if held[0] is one else one)
        _write(ddb, settings.table, "store", 0, "alpha")
        _write(ddb, settings.table, "store", 1, "beta")
        assert wait_until(lambda: _converged(settings, ddb, mbs), timeout=60)
        assert standby.tailer.applied == 0
        active.stop(release=False)  # dies: the lease is left to expire
        died = time.monotonic()
        assert standby.tailer._lease is not None
        assert wait_until(lambda: standby.tailer._lease.held, timeout=15, interval=0.1)
        assert time.monotonic() - died <= 4.0 + 1.0 + 1.5
        _write(ddb, settings.table, "rewrite", 0, "alpha", variant=1)
        _write(ddb, settings.table, "delete", 1, "beta")
        _write(ddb, settings.table, "store", 2, "beta")
        assert wait_until(lambda: _converged(settings, ddb, mbs), timeout=60)
        # The index can show a page's effect just before the tailer counts that page.
        assert wait_until(lambda: standby.tailer.applied > 0, timeout=10, interval=0.1)
        standby.stop()


def test_tail_command_exits_non_zero_after_a_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer
    from typer.testing import CliRunner

    from indexer.cli import tail_cmds
    from indexer.sources.tail.state import Gap

    seen: dict[str, Any] = {}

    class Stub:
        def __init__(self, stage: str) -> None:
            self.gaps: list[Gap] = []
            self.applied = 0
            self.stage = stage

        def run(self, stop: threading.Event) -> None:
            if self.stage == "vectors":  # one reader's gap is the command's failure
                self.gaps.append(Gap("s1", "7", "trimmed"))

    def build(settings: Any, start_at: str, lease_s: float, renew_s: float, stage: str) -> Stub:
        seen.update(table=settings.table, start_at=start_at)
        seen.setdefault("stages", []).append(stage)
        return Stub(stage)

    monkeypatch.setattr(tail_cmds, "build_tailer", build)
    # No table "other": the start-up check (tests/integration/test_init.py) is not this test's.
    monkeypatch.setattr(tail_cmds, "require_tables", lambda settings: None)
    app = typer.Typer()
    tail_cmds.register(app)
    app.command("noop")(lambda: None)  # a group, so `tail` is a subcommand
    result = CliRunner().invoke(app, ["tail", "--table", "other", "--start-at", "latest",
                                      "--stage", "each"])
    assert result.exit_code == 1
    assert seen == {"table": "other", "start_at": "latest", "stages": ["fulltext", "vectors"]}
    seen.clear()
    # the default is one reader per shard (issue 23 part 8: the stream's other reader slot free)
    assert CliRunner().invoke(app, ["tail", "--table", "other"]).exit_code == 0
    assert seen["stages"] == ["all"]


def test_a_stage_change_starts_where_the_old_readers_left_off() -> None:
    """`each` → `all` (the old default to the new) and back: the new reader starts at the
    earliest position the old ones applied, a shard one of them lacks from its start."""
    from indexer.adapters.dynamodb.state import ShardCheckpoint
    from indexer.sources.tail.positions import SeededPositions

    class Store:
        def __init__(self, *saved: ShardCheckpoint) -> None:
            self.saved = {c.shard_id: c for c in saved}

        def load(self) -> dict[str, ShardCheckpoint]:
            return dict(self.saved)

        def save(self, checkpoint: ShardCheckpoint) -> None:
            self.saved[checkpoint.shard_id] = checkpoint

    fulltext = Store(ShardCheckpoint("a", "120", created=5), ShardCheckpoint("b", "900", True),
                     ShardCheckpoint("c", "70"))
    vectors = Store(ShardCheckpoint("a", "80", created=3), ShardCheckpoint("b", "850"))
    merged = SeededPositions(Store(), [fulltext, vectors])
    assert merged.load() == {"a": ShardCheckpoint("a", "80", created=3),
                             "b": ShardCheckpoint("b", "850"), "c": ShardCheckpoint("c", None)}
    # until every old reader has positions there is nothing to start from but the stream
    assert SeededPositions(Store(), [fulltext, Store()]).load() == {}
    # once the new reader saved its own, they alone count (and are saved to its store only)
    merged.save(ShardCheckpoint("a", "130"))
    assert merged.load() == {"a": ShardCheckpoint("a", "130")}
    assert fulltext.saved["a"].sequence == "120"
