"""Issue 40 part 6, the progress object alone: outside a terminal it logs each task's
done/total, rate and ETA every interval, a line while nothing is counted yet, and one final
line; in a terminal it is rich's own bar."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator

import pytest
from rich.console import Console
from rich.progress import Progress

from indexer import logs
from indexer.cli.progress import JsonProgress, progress


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    monkeypatch.delenv(logs.LEVEL_ENV, raising=False)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.JsonFormatter())
    logger = logging.getLogger("sidecar.progress")
    logger.addHandler(handler)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


def test_json_progress_reports_done_rate_and_eta(lines: io.StringIO) -> None:
    with JsonProgress("backfill", 0.05) as bar:
        time.sleep(0.12)  # an export being made: nothing counted yet
        task = bar.add_task("items", total=200)
        for _ in range(10):
            bar.advance(task, 10)
            time.sleep(0.03)
    entries = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert entries[0]["message"] == "backfill running" and "elapsed_s" in entries[0]
    items = [e for e in entries if e.get("task") == "items"]
    assert len(items) >= 3, entries
    dones = [e["done"] for e in items]
    assert dones == sorted(dones) and dones[0] < dones[-1] == 100
    final = items[-1]
    assert final["final"] is True and final["total"] == 200 and final["percent"] == 50.0
    assert final["rate_per_s"] > 0 and final["eta_s"] is not None
    assert all(not e["final"] for e in items[:-1])


def test_a_terminal_gets_the_bar() -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True)
    piped = Console(file=io.StringIO(), force_terminal=False)
    assert not isinstance(progress(terminal, "x", 1.0), JsonProgress)
    assert isinstance(progress(terminal, "x", 1.0), Progress)
    assert isinstance(progress(piped, "x", 1.0), JsonProgress)
