"""Measurement helpers: rates, latency percentiles, closed-loop load, peak memory.

Latencies are measured with ``perf_counter`` around each call in the calling thread, so a
queue in front of a busy engine shows up as latency, as a user would see it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Latency:
    """Percentiles (ms) and throughput of a closed-loop run; ``errors`` counts failed calls."""

    p50_ms: float
    p95_ms: float
    p99_ms: float
    rps: float
    calls: int
    errors: int = 0
    clients: int = 1

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (no interpolation: every figure is one real observation)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[rank]


def summarize(samples: list[float], errors: int, elapsed_s: float, clients: int) -> Latency:
    ms = [s * 1000 for s in samples]
    return Latency(
        p50_ms=percentile(ms, 50),
        p95_ms=percentile(ms, 95),
        p99_ms=percentile(ms, 99),
        rps=len(samples) / elapsed_s if elapsed_s > 0 else 0.0,
        calls=len(samples),
        errors=errors,
        clients=clients,
    )


@dataclass
class _Recorder:
    samples: list[float] = field(default_factory=list)
    errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float | None) -> None:
        with self.lock:
            if seconds is None:
                self.errors += 1
            else:
                self.samples.append(seconds)


def closed_loop(
    call: Callable[[Any], bool], inputs: Sequence[Any], *, clients: int, seconds: float
) -> Latency:
    """``clients`` threads each calling ``call`` back to back over ``inputs`` (cycled, each
    thread from a different offset) for ``seconds``; a call returning False is an error."""
    recorder = _Recorder()
    stop_at = time.perf_counter() + seconds

    def worker(offset: int) -> None:
        n = offset
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            try:
                ok = call(inputs[n % len(inputs)])
            except Exception:
                ok = False
            recorder.add(time.perf_counter() - started if ok else None)
            n += 1

    started = time.perf_counter()
    threads = [
        threading.Thread(target=worker, args=(i * len(inputs) // clients,), daemon=True)
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return summarize(recorder.samples, recorder.errors, time.perf_counter() - started, clients)


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(c) for c in task.read_text().split()]
        except OSError:
            continue
    return found


def _hwm_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_rss_mib(pid: int) -> float:
    """Peak resident memory (VmHWM) of the largest process in ``pid``'s tree, in MiB.

    A Celery prefork worker is a parent plus a pool child; the child holds the model, so the
    largest process is the figure that matters for sizing a worker.
    """
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += _children(current)
    return max(_hwm_kib(p) for p in tree) / 1024
