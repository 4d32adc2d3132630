"""The pace of bulk maintenance (indexer.core.pace): batches held to a rate, never slowed
when the engine is already behind it."""

from __future__ import annotations

from indexer.core.pace import MAX_BATCH, Pace, batch_size


class FakeClock:
    """A clock that moves only when slept on (or told to)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_batches_are_a_tenth_of_the_rate_within_bounds() -> None:
    assert batch_size(2000) == 200
    assert batch_size(5) == 1
    assert batch_size(1_000_000) == MAX_BATCH
    assert batch_size(0) == MAX_BATCH
    assert batch_size(0, 1000) == 1000
    assert batch_size(50_000, 1000) == 1000


def test_fast_batches_wait_for_the_rate() -> None:
    clock = FakeClock()
    pace = Pace(100, clock, clock.sleep)
    pace.start()
    for _ in range(10):
        pace.done(10)  # instant engine calls: every batch sleeps 0.1 s
    assert clock.now - 100.0 == 1.0
    assert len(clock.slept) == 10


def test_slow_engine_is_never_slowed_further() -> None:
    clock = FakeClock()
    pace = Pace(100, clock, clock.sleep)
    pace.start()
    for _ in range(5):
        clock.now += 0.5  # each batch of 10 takes 0.5 s: already behind 100/s
        pace.done(10)
    assert clock.slept == []


def test_unpaced_never_sleeps() -> None:
    clock = FakeClock()
    pace = Pace(0, clock, clock.sleep)
    for _ in range(100):
        pace.done(1000)
    assert clock.slept == []
