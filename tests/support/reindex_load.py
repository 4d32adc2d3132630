"""The reindex-under-load script the reindex tests share (full text, vectors, the Qdrant server
path): a write load on ``BOX`` and searches through the API on a fixed schedule run while a
reindex swaps the alias; the load goes on past the swap."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx

from sidecar_tools.writer.mapping import to_items
from sidecar_tools.writer.store import delete_message, rewrite_message, store_message
from tests.support.api_fixtures import TOKEN_A
from tests.support.waiting import wait_for

SAMPLE = Path(__file__).resolve().parents[2] / "tools/sidecar_tools/demo_data/sample-mailbox.jsonl"
BOX, OTHER = "reindex@example.com", "nobody@example.com"
FIRST = 30  # stored before the reindex; the rest of the 40 are stored by the load


def say(message: str) -> None:
    print(time.strftime("%H:%M:%S"), message, flush=True)


def rewritten(email: dict[str, Any], n: int, text: bool) -> dict[str, Any]:
    meta, content = email["metadata"], email["content"]
    forai = f"rewritten {n}: {content.get('forAI') or ''}" if text else content.get("forAI")
    return {
        **email,
        "metadata": {**meta, "subject": f"[rewritten {n}] {meta.get('subject') or ''}"},
        "content": {**content, "forAI": "" if text and n % 5 == 0 else forai},
        "processing": {**email["processing"], "specVersion": f"2.{n}"},
    }


class Load:
    """Store / rewrite / delete messages of BOX until stopped; counts what it did.
    ``text``: rewrites change ``forai`` too (a new vector), sometimes to blank (no point)."""

    def __init__(
        self,
        ddb: Any,
        table: str,
        emails: list[dict[str, Any]],
        text: bool = False,
        pause_s: float = 0.15,
    ) -> None:
        self.ddb, self.table, self.text, self.pause_s = ddb, table, text, pause_s
        self.stored, self.reserve = emails[:FIRST], emails[FIRST:]
        self.done: dict[str, int] = {"store": 0, "rewrite": 0, "delete": 0}
        self.stop, self.rng = threading.Event(), random.Random(11)

    def step(self, n: int) -> None:
        op = self.rng.choice(["store", "rewrite", "rewrite", "delete"])
        if op == "store" and self.reserve:
            email = self.reserve.pop()
            assert store_message(self.ddb, self.table, to_items(email, BOX))
            self.stored.append(email)
        elif op == "delete" and len(self.stored) > 10:
            email = self.stored.pop(self.rng.randrange(len(self.stored)))
            assert delete_message(self.ddb, self.table, BOX, email["messageId"])
            self.reserve.insert(0, email)  # stored again later: a re-delivery after deletion
        else:
            op, email = "rewrite", self.rng.choice(self.stored)
            assert rewrite_message(
                self.ddb, self.table, to_items(rewritten(email, n, self.text), BOX)
            )
        self.done[op] += 1

    def total(self) -> int:
        return sum(self.done.values())

    def run(self) -> None:
        n = 0
        while not self.stop.wait(self.pause_s):
            n += 1
            self.step(n)


class Searches:
    """A search through the API issued every ``interval_s`` (on a fixed schedule: slow answers
    overlap in a small pool); every non-200 answer or error is a failure."""

    def __init__(self, url: str, mode: str = "fulltext", interval_s: float = 0.1) -> None:
        self.url, self.mode, self.ok, self.failures = url, mode, 0, list[str]()
        self.interval_s = interval_s
        self.stop, self.issued, self.lock = threading.Event(), 0, threading.Lock()

    def _one(self, http: httpx.Client) -> None:
        params = {"q": "release OR review", "mode": self.mode}
        try:
            r = http.get(f"/v1/mailboxes/{BOX}/search", params=params)
            failure = (
                None
                if r.status_code == 200 and isinstance(r.json().get("hits"), list)
                else f"{r.status_code} {r.text[:200]}"
            )
        except httpx.HTTPError as exc:
            failure = repr(exc)
        with self.lock:
            if failure is None:
                self.ok += 1
            else:
                self.failures.append(failure)

    def assert_never_failed(self, window_s: float, during_reindex: int) -> None:
        """Every search answered; the searches kept their schedule (half of it at least, on a
        loaded machine) through the window, and some were issued while the reindex ran."""
        assert self.failures == [] and self.ok == self.issued
        assert self.issued >= 0.5 * window_s / self.interval_s and during_reindex >= 1

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {TOKEN_A}"}
        with (
            httpx.Client(base_url=self.url, headers=headers, timeout=20) as http,
            ThreadPoolExecutor(8) as pool,
        ):
            tick = time.monotonic()
            while not self.stop.is_set():
                pool.submit(self._one, http)
                self.issued += 1
                tick += self.interval_s
                self.stop.wait(max(0.0, tick - time.monotonic()))


@contextmanager
def running(target: Any, stop: threading.Event) -> Any:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(timeout=60)


R = TypeVar("R")


@dataclass
class UnderLoad(Generic[R]):
    report: R  # what the reindex returned
    window_s: float  # how long the searches ran
    during: int  # searches issued while the reindex ran


def reindex_under_load(searches: Searches, load: Load, reindex: Callable[[], R]) -> UnderLoad[R]:
    """Searches and the load start; once a search has answered and a write landed, the
    reindex runs; after the swap the load goes on until three more writes (and every kind of
    write at least once), then both stop."""
    with running(searches.run, searches.stop), running(load.run, load.stop):
        began = time.monotonic()
        wait_for(lambda: searches.ok >= 1 and load.total() >= 1, timeout=120,
                 message=lambda: f"load and searches not under way: {load.done}, "
                 f"{searches.ok} ok, failures {searches.failures[:3]}")
        before = searches.issued
        report = reindex()
        during = searches.issued - before
        swapped = load.total()
        wait_for(lambda: load.total() >= swapped + 3 and all(load.done.values()), timeout=120,
                 message=lambda: f"the load stopped at the swap: {load.done} ({swapped} before)")
        load.stop.set()
    return UnderLoad(report, time.monotonic() - began, during)
